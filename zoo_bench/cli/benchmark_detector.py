"""``zoo benchmark-detector``: images/s through :class:`zoo.Detector` and through the ``zoo
detect`` job on image files (decoding included) against pure inference of the same graph at
the same batch size, side by side in one process (see :mod:`zoo_bench.detector`); with
``--batch-sizes``, seconds per image at each batch size instead; with ``--busy N``, the wall
time of the ``zoo detect`` command on two cores beside N CPU-bound processes against its
quiet time instead (about 3x is a fair share; idle-priority threads once made it 70x).

Examples:
    zoo benchmark-detector --network ssd_mobilenetv2_stride8 --data-shape 192
    zoo benchmark-detector --network faster_rcnn_mobilenetv2 --data-shape 320 \\
        --mixed-orientations --batch-sizes 1,2,8
    zoo benchmark-detector --checkpoint output/train/ssd_mobilenetv2_stride8 \\
        --images output/shapes/JPEGImages
    zoo benchmark-detector --busy 4 --num-images 16 --image-size 1024 --runs 3
"""
from zoo_bench.options import DetectorBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p.add_mutually_exclusive_group(), DetectorBenchmarkOptions, "network",
              "checkpoint")
    add_flags(p, DetectorBenchmarkOptions, "data_shape", "image_dir", "num_images",
              "image_size", "work_dir", "batch_size", "runs", "score_threshold",
              "mixed_orientations", "batch_sizes", "busy")


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.detector import (batch_sweep, benchmark_detector, busy_detect, busy_report,
                                    report, sweep_report)
    network = None if args.checkpoint else args.network
    options = DetectorBenchmarkOptions.from_flags(args, network=network)
    if options.busy:
        print(busy_report(busy_detect(options, options.busy)))
    elif options.batch_sizes:
        print(sweep_report(batch_sweep(options, options.batch_sizes)))
    else:
        print(report(benchmark_detector(options)))
    return 0
