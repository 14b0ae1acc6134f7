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
from zoo_bench.options import BUSY_CORES, DetectorBenchmarkOptions
from zoo.config.registry import list_models
from zoo.cli.common import add_input_size_flags, comma_list, fraction, options_from, positive_int

__all__ = ["add_arguments", "run"]

DEFAULTS = DetectorBenchmarkOptions()


def add_arguments(p):
    source = p.add_mutually_exclusive_group()
    source.add_argument("--network", choices=list_models(), metavar="NAME",
                        default=DEFAULTS.network,
                        help="registered model with random weights: %s"
                             % ", ".join(list_models()))
    source.add_argument("--checkpoint", metavar="PREFIX", help="artifact prefix, run as saved")
    add_input_size_flags(p, DEFAULTS, of_network=True)
    p.add_argument("--images", dest="image_dir", default=None,
                   help="folder of images, any format the zoo reads (JPEG, PNG, BMP, TIFF, "
                        "WebP); other files are skipped and named (default: generate "
                        "--num-images into --work-dir)")
    p.add_argument("--num-images", type=positive_int, default=DEFAULTS.num_images,
                   help="images to generate")
    p.add_argument("--image-size", type=positive_int, default=DEFAULTS.image_size,
                   help="side of the generated images")
    p.add_argument("--work-dir", default=DEFAULTS.work_dir, help="where to generate them")
    p.add_argument("--batch-size", type=positive_int, default=DEFAULTS.batch_size,
                   help="images per batch")
    p.add_argument("--runs", type=positive_int, default=DEFAULTS.runs,
                   help="timed passes of each kind; the best is reported")
    # --threshold as zoo detect and demo name it; --score-threshold, its old name, still works
    p.add_argument("--threshold", "--score-threshold", dest="score_threshold", type=fraction,
                   default=DEFAULTS.score_threshold, metavar="THRESHOLD",
                   help="lowest score kept")
    p.add_argument("--mixed-orientations", action="store_true",
                   help="generate portrait and landscape JPEGs of several aspect ratios "
                        "(--image-size on the long side) instead of square ones")
    p.add_argument("--batch-sizes", type=comma_list(positive_int), default=None,
                   metavar="N,...", help="time seconds per image at each of these batch "
                                         "sizes instead (e.g. 1,2,8)")
    p.add_argument("--busy", type=positive_int, default=None, metavar="N",
                   help="time the zoo detect command on %d cores, quiet and beside N "
                        "CPU-bound processes on the same cores, instead (e.g. 4)" % BUSY_CORES)


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.detector import (batch_sweep, benchmark_detector, busy_detect, busy_report,
                                    report, sweep_report)
    network = None if args.checkpoint else args.network
    options = options_from(DetectorBenchmarkOptions, args, network=network)
    if args.busy:
        print(busy_report(busy_detect(options, args.busy)))
    elif args.batch_sizes:
        print(sweep_report(batch_sweep(options, args.batch_sizes)))
    else:
        print(report(benchmark_detector(options)))
    return 0
