"""``zoo benchmark-data``: throughput of the SSD training data pipeline alone, ours beside
GluonCV's DataLoader, on the same JPEGs with the same workers (see
:mod:`zoo_bench.data`). ``--dataset embedded`` generates ``--num-images`` JPEGs of
``--image-size`` into ``--data-root`` (default ``output/shapes_<image-size>``);
``--data-threads`` is our loader's threads and GluonCV's worker processes.

Example:
    zoo benchmark-data --data-shape 512 --batch-size 32 --data-threads 2
"""
from zoo_bench.options import DATA_COMPARISONS, DataBenchmarkOptions
from zoo.cli.common import (add_batch_flag, add_dataset_flags, add_hidden_alias,
                            add_input_size_flags, nonnegative_int, options_from, positive_int)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_dataset_flags(p, DataBenchmarkOptions, {"--split": "split to read"})
    # Generating the embedded set into another size's folder would replace that dataset.
    p.set_defaults(data_root=DataBenchmarkOptions.data_root)
    add_hidden_alias(p, "--num-workers", "data_threads", type=positive_int)
    p.add_argument("--image-size", type=positive_int, default=DataBenchmarkOptions.image_size,
                   help="embedded only: side of the generated square JPEGs; 448x448 is about "
                        "the area of a 500x375 VOC image")
    p.add_argument("--num-images", type=positive_int, default=DataBenchmarkOptions.num_images,
                   help="embedded only: images generated; batches cycle over them")
    add_input_size_flags(p, DataBenchmarkOptions)
    add_batch_flag(p, DataBenchmarkOptions.batch_size)
    p.add_argument("--batches", type=positive_int, default=DataBenchmarkOptions.batches,
                   help="timed batches per side (default: 5 per worker; GluonCV's workers "
                        "each make whole batches, so a multiple of the workers times them "
                        "evenly)")
    p.add_argument("--warmup", type=nonnegative_int, default=DataBenchmarkOptions.warmup,
                   help="untimed batches first, per side (default: one per worker, so both "
                        "pipelines are full when the clock starts)")
    p.add_argument("--seed", type=nonnegative_int, default=DataBenchmarkOptions.seed)
    p.add_argument("--opencv-threads", type=positive_int,
                   default=DataBenchmarkOptions.opencv_threads,
                   help="cv2.setNumThreads for our side (GluonCV's workers use MXNet's own "
                        "OpenCV; default: OpenCV's, one per core)")
    p.add_argument("--compare", choices=DATA_COMPARISONS + ("none",),
                   default=DataBenchmarkOptions.compare,
                   help="'none': time ours only")


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.data import benchmark_data
    benchmark_data(options_from(DataBenchmarkOptions, args,
                                compare=None if args.compare == "none" else args.compare))
    return 0
