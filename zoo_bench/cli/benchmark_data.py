"""``zoo benchmark-data``: throughput of the SSD training data pipeline alone, ours beside
GluonCV's DataLoader, on the same JPEGs with the same workers (see
:mod:`zoo_bench.data`). ``--dataset embedded`` generates ``--num-images`` JPEGs of
``--image-size`` into ``--data-root`` (default ``output/shapes_<image-size>``);
``--data-threads`` is our loader's threads and GluonCV's worker processes.

Example:
    zoo benchmark-data --data-shape 512 --batch-size 32 --data-threads 2
"""
from zoo_bench.options import DataBenchmarkOptions
from zoo.cli.common import add_hidden_alias
from zoo.flags import add_flags, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, DataBenchmarkOptions, "dataset", "data_root", "split", "annotations",
              "image_dir", "skip_bad", "data_threads")
    add_hidden_alias(p, "--num-workers", "data_threads", type=positive_int)
    add_flags(p, DataBenchmarkOptions, "image_size", "num_images", "data_shape", "batch_size",
              "batches", "warmup", "seed", "opencv_threads", "compare")


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.data import benchmark_data
    benchmark_data(DataBenchmarkOptions.from_flags(
        args, compare=None if args.compare == "none" else args.compare))
    return 0
