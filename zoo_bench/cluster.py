"""``zoo benchmark-cluster``: photos/s of ``zoo detect --ray`` on local Ray clusters of 1 and 2
nodes beside ``zoo detect`` on the same photos.

Every subject is ``zoo detect --crops`` with its default flags otherwise (and
``--detect-flags``), in a fresh process timed as ``zoo benchmark-photos`` times one
(:func:`zoo_bench.large_photos.measured_runs`): on every photo (N) and on the first
:data:`~zoo_bench.options.FIXED_PHOTOS`, its photos/s ``(N - 2) / (wall(N) - wall(2))``, so
that loading the model (and, with ``--ray``, connecting to the cluster and starting its
actors) is counted once, in the fixed cost:

    detect     zoo detect --checkpoint CHECKPOINT PHOTOS --crops
    ray-N      the same with --ray ADDRESS, on a ray.cluster_utils.Cluster of N nodes of
               --node-cpus CPUs each, started before the runs and stopped after them (one
               detector, on one OpenMP thread, a CPU: zoo detect --ray's default)

The clusters are nodes of this machine: they share its cores, its memory and its disk, so
that a second node adds cores only where the machine has cores no node uses; a run's peak
memory is its driver's (the actors' processes are the cluster's).
"""
import contextlib
import os
from types import SimpleNamespace

from zoo.ray.cluster import LOOPBACK_ONLY
from zoo_bench import child_environment
from zoo_bench.large_photos import detect_argv, fp32_artifact, measured_runs, photo_paths
from zoo_bench.options import FIXED_PHOTOS, ClusterBenchmarkOptions
from zoo_bench.timing import environment, machine_line, print_line

__all__ = ["ClusterBenchmarkOptions", "benchmark_cluster", "table_lines"]

NODE_OBJECT_STORE_BYTES = 150 << 20
"""Each node's object store: Ray's least is about 75 MB, and a run keeps only paths and rows
there."""


def benchmark_cluster(options, log=print_line):
    """Time ``zoo detect`` and ``zoo detect --ray`` on each cluster of the options; report
    lines go to ``log``. Returns ``{subject: SubjectFigures}``."""
    os.environ.setdefault(*LOOPBACK_ONLY)  # the clusters' nodes, and the drivers, on 127.0.0.1
    paths = photo_paths(options)
    checkpoint = fp32_artifact(SimpleNamespace(
        checkpoint=options.checkpoint, network=options.network, data_shape=options.data_shape,
        max_size=options.max_size, output_dir=options.output_dir), log)
    log("%d photo(s), %s; each subject in fresh processes, median of %d run(s); zoo detect "
        "--crops%s"
        % (len(paths), checkpoint, options.runs,
           "".join(" " + word for word in options.detect_flags)))
    log(machine_line(environment("MXNET_ENGINE_TYPE", "OMP_NUM_THREADS")))
    results = {"detect": measured_runs("detect", lambda photos, output: detect_argv(
        checkpoint, photos, output, options.detect_flags), paths, options, child_environment())}
    for nodes in options.nodes:
        with local_cluster(nodes, options.node_cpus) as address:
            flags = options.detect_flags + ("--ray", address)
            # the environment once the cluster runs: Ray sets its authentication mode there,
            # which a driver needs
            results["ray-%d" % nodes] = measured_runs(
                "ray-%d" % nodes, lambda photos, output: detect_argv(checkpoint, photos,
                                                                      output, flags),
                paths, options, child_environment())
    for line in table_lines(results, len(paths), options.node_cpus):
        log(line)
    return results


@contextlib.contextmanager
def local_cluster(nodes, cpus):
    """The address of a ``ray.cluster_utils.Cluster`` of ``nodes`` nodes of ``cpus`` CPUs
    each on this machine, for the block; stopped after it."""
    from ray.cluster_utils import Cluster  # Ray only where this benchmark runs
    node = {"num_cpus": cpus, "object_store_memory": NODE_OBJECT_STORE_BYTES}
    cluster = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
    try:
        for _ in range(nodes - 1):
            cluster.add_node(**node)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()


def table_lines(results, photos, node_cpus):
    """A row per subject, its photos/s and its ratio to ``zoo detect``'s."""
    lines = ["%-8s %9s %10s %9s %8s %10s %11s" % (
        "subject", "total s", "%d photos s" % FIXED_PHOTOS, "photos/s", "peak MB",
        "detections", "x detect")]
    reference = results["detect"].per_image_s
    for subject, r in results.items():
        rate = "%.2f" % (1 / r.per_image_s) if r.per_image_s > 0 else "-"
        ratio = "%.2fx" % (reference / r.per_image_s) if min(reference, r.per_image_s) > 0 \
            else "-"
        lines.append("%-8s %9.2f %10.2f %9s %8.0f %10s %11s" % (
            subject, r.wall_s, r.fixed_s, rate, r.peak_rss_mb,
            "-" if r.detections is None else r.detections, ratio))
    lines.append("total s: the process on all %d photos; %d photos s: on the first %d (the "
                 "fixed cost: loading the model; with --ray, connecting and starting the "
                 "actors too); photos/s: (%d - %d) / (total - %d photos s); ray-N: a local "
                 "Ray cluster of N nodes of %d CPU(s), one detector a CPU; peak MB: the "
                 "driver's; x detect: photos/s over zoo detect's"
                 % (photos, FIXED_PHOTOS, FIXED_PHOTOS, photos, FIXED_PHOTOS, FIXED_PHOTOS,
                    node_cpus))
    if any(r.per_image_s <= 0 for r in results.values()):
        lines.append("a cost per photo of 0 or less is under the noise of the fixed cost: "
                     "time more photos (--num-images) or more runs (--runs), on a quiet "
                     "machine")
    return lines
