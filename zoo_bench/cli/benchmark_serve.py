"""``zoo benchmark-serve``: requests/s and p50/p99 latency of ``zoo serve`` on loopback at
1, 4 and 16 concurrent clients, with dynamic batching on and off, beside the same detector
called in-process one photo at a time, printed side by side with their ratios (see
:mod:`zoo_bench.serve`). Needs the ray extra.

Examples:
    zoo benchmark-serve
    zoo benchmark-serve --checkpoint output/train/ssd_mobilenetv2_stride8 --requests 128
    zoo benchmark-serve --network ssd_mobilenetv2_stride8 --clients 1,4 --requests 8
"""
from zoo.flags import add_flags
from zoo_bench.options import ServeBenchmarkOptions

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p.add_mutually_exclusive_group(), ServeBenchmarkOptions, "network",
              "checkpoint")
    add_flags(p, ServeBenchmarkOptions, "data_shape", "num_images", "image_size", "work_dir",
              "clients", "requests", "replicas", "max_batch_size", "batch_wait", "port",
              "seed")


def run(args):
    # Imported here: the benchmark loads MXNet and Ray, which the parser (--help) does
    # without.
    from zoo_bench.serve import benchmark_serve, report
    network = None if args.checkpoint else args.network
    print(report(benchmark_serve(ServeBenchmarkOptions.from_flags(args, network=network))))
    return 0
