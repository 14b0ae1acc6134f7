"""``zoo benchmark-memory``: peak memory and step time of training with and without
memory saving, each configuration in a fresh process (see :mod:`zoo_bench.memory`).

Example:
    zoo benchmark-memory --network ssd_resnet101 --data-shape 512 --batch-size 8
"""
from zoo_bench.options import MemoryBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, MemoryBenchmarkOptions, "network", "data_shape", "batch_size", "steps",
              "warmup", "configurations")


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.memory import benchmark_memory
    benchmark_memory(MemoryBenchmarkOptions.from_flags(args))
    return 0
