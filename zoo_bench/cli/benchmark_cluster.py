"""``zoo benchmark-cluster``: photos/s of ``zoo detect --ray`` on local Ray clusters of 1 and 2
nodes (``ray.cluster_utils.Cluster``, ``--node-cpus`` CPUs a node) beside ``zoo detect`` on the
same photos, each in fresh processes, printed side by side with their ratios (see
:mod:`zoo_bench.cluster`). Without ``--images`` it generates ``--num-images`` photos of
``--image-size`` into ``--output-dir``; without ``--checkpoint`` it exports ``--network`` with
fresh parameters there (kept for the next run). Needs the ray extra.

Example:
    zoo benchmark-cluster --nodes 1,2 --num-images 32
    zoo benchmark-cluster --checkpoint model.onnx --images photos/*.jpg --node-cpus 2
"""
from zoo_bench.options import ClusterBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, ClusterBenchmarkOptions, "images", "num_images", "image_size", "checkpoint",
              "network", "data_shape", "max_size", "nodes", "node_cpus", "runs",
              "detect_flags", "output_dir", "seed")


def run(args):
    # Imported here: the benchmark starts Ray clusters, which the parser (--help) does without.
    from zoo_bench.cluster import benchmark_cluster
    benchmark_cluster(ClusterBenchmarkOptions.from_flags(args))
    return 0
