"""``zoo benchmark-memory``: peak memory and step time of training with and without
memory saving, each configuration in a fresh process (see :mod:`zoo_bench.memory`).

Example:
    zoo benchmark-memory --network ssd_resnet101 --data-shape 512 --batch-size 8
"""
from zoo_bench.options import MemoryBenchmarkOptions
from zoo.config.registry import list_models
from zoo.cli.common import (add_batch_flag, add_input_size_flags, comma_list, nonnegative_int,
                            options_from, positive_int)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("--network", default=MemoryBenchmarkOptions.network, choices=list_models(),
                   metavar="NAME", help="registered model: %s" % ", ".join(list_models()))
    add_input_size_flags(p, MemoryBenchmarkOptions)
    add_batch_flag(p, MemoryBenchmarkOptions.batch_size)
    p.add_argument("--steps", type=positive_int, default=MemoryBenchmarkOptions.steps,
                   help="timed steps (the median is reported)")
    p.add_argument("--warmup", type=nonnegative_int, default=MemoryBenchmarkOptions.warmup,
                   help="untimed steps first")
    p.add_argument("--configurations", type=comma_list(str),
                   default=",".join(MemoryBenchmarkOptions.configurations),
                   help="comma-separated, plain included: plain (the training graph as it "
                        "is), mxnet-mirror (MXNET_BACKWARD_DO_MIRROR=1), memory-saving "
                        "(what `zoo train --memory-saving` binds)")


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.memory import benchmark_memory
    benchmark_memory(options_from(MemoryBenchmarkOptions, args))
    return 0
