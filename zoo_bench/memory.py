"""Peak memory and step time of training with and without memory saving.

Each configuration runs in a fresh process, since a process has one peak: it binds the
training graph of the network as training does, runs the warm-up and then the timed
training steps (forward, backward and SGD update) on one batch of random images with a few
random boxes each, and reports the size of MXNet's planned intermediate arrays, the
process's peak resident memory (ru_maxrss), the median step time (wall clock and CPU) and
the loss of the first step (the same parameters and batch everywhere, so equal losses show
that the math is unchanged); then each configuration's ratios to plain. Configurations:

    plain          the training graph as it is
    mxnet-mirror   MXNET_BACKWARD_DO_MIRROR=1: MXNet recomputes all but convolutions
    memory-saving  what ``zoo train --memory-saving`` binds (zoo.engine.memory)
"""
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
from dataclasses import dataclass

import mxnet as mx
import numpy as np

from zoo.engine.memory import MemoryPlanner, memory_saving_symbol
from zoo.engine.trainer import bind_training_module
from zoo.model import get_model
from zoo_bench import child_environment
from zoo_bench.options import CONFIGURATIONS, MemoryBenchmarkOptions  # defined without MXNet
from zoo_bench.timing import Stopwatch, print_line

__all__ = ["CONFIGURATIONS", "MemoryBenchmarkOptions", "benchmark_memory", "measure"]

LABEL_ROWS = 8
BOXES_PER_IMAGE = 4


@dataclass(frozen=True)
class MemoryFigures:
    """One configuration's figures, measured in its own process."""
    planned_mb: int
    peak_rss_mb: float
    step_s: float
    cpu_s: float
    loss: float


def random_batch(model, shapes, seed=0):
    """Uniform noise images and ``BOXES_PER_IMAGE`` random boxes per image, rows padded
    with -1 as the loader pads them."""
    rng = np.random.RandomState(seed)
    data = rng.uniform(-1, 1, shapes["data"]).astype(np.float32)
    label = np.full(shapes["label"], -1, np.float32)
    batch_size, num_classes = shapes["data"][0], model.config["num_classes"]
    corners = rng.uniform(0, 0.6, (batch_size, BOXES_PER_IMAGE, 2))
    sides = rng.uniform(0.1, 0.4, (batch_size, BOXES_PER_IMAGE, 2))
    label[:, :BOXES_PER_IMAGE, 0] = rng.randint(num_classes, size=(batch_size, BOXES_PER_IMAGE))
    label[:, :BOXES_PER_IMAGE, 1:3] = corners
    label[:, :BOXES_PER_IMAGE, 3:5] = corners + sides
    label[:, :BOXES_PER_IMAGE, 5:] = 0
    inputs = model.input_arrays(data)
    names = list(model.input_shapes())
    return mx.io.DataBatch(data=[mx.nd.array(inputs[n]) for n in names],
                           label=[mx.nd.array(label)])


def process_cpu_seconds():
    """User and system CPU time of this process, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(options, configuration):
    """Bind, train warm-up + timed steps in this process and return its
    :class:`MemoryFigures` (the peak is this process's: call it in a fresh one)."""
    mx.random.seed(0)
    np.random.seed(0)
    model = get_model(options.network, data_shape=options.shape)
    shapes = model.train_input_shapes(options.batch_size, LABEL_ROWS)
    symbol = model.train_symbol()
    if configuration == "memory-saving":
        symbol = memory_saving_symbol(symbol, shapes)
    planned_mb = MemoryPlanner(symbol, shapes).planned_mb(symbol)
    module = bind_training_module(symbol, list(model.input_shapes()), shapes)
    arg_params, aux_params = model.init_params(seed=0)
    module.init_params(arg_params=arg_params, aux_params=aux_params)
    module.init_optimizer(optimizer="sgd",
                          optimizer_params={"learning_rate": 1e-3, "momentum": 0.9})
    batch = random_batch(model, shapes)
    wall, cpu, first_loss = [], [], None
    for step in range(options.warmup + options.steps):
        watch, start_cpu = Stopwatch(), process_cpu_seconds()
        module.forward_backward(batch)
        module.update()
        mx.nd.waitall()
        if step >= options.warmup:
            wall.append(watch())
            cpu.append(process_cpu_seconds() - start_cpu)
        if first_loss is None:
            first_loss = float(sum(model.training_losses(module.get_outputs()).values()))
    return MemoryFigures(planned_mb, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                         statistics.median(wall), statistics.median(cpu), first_loss)


def measure_in_child(options, configuration):
    """:func:`measure` in a fresh Python process (this module run with ``-m``), with the
    configuration's environment: a process's peak memory is its own."""
    request = json.dumps({"options": dataclasses.asdict(options),
                          "configuration": configuration})
    done = subprocess.run([sys.executable, "-m", __name__, request],
                          env=child_environment(**CONFIGURATIONS[configuration]),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (configuration, done.stderr[-4000:]))
    return MemoryFigures(**json.loads(done.stdout.splitlines()[-1]))


def report_lines(results):
    """The table and each configuration's ratios to plain."""
    lines = ["%-14s %11s %13s %12s %11s %12s" % ("configuration", "planned MB", "peak RSS MB",
                                                 "step s", "CPU s/step", "first loss")]
    for name, r in results.items():
        lines.append("%-14s %11d %13.0f %12.2f %11.2f %12.5f" % (
            name, r.planned_mb, r.peak_rss_mb, r.step_s, r.cpu_s, r.loss))
    plain = results["plain"]
    for name, r in results.items():
        if name != "plain":
            lines.append("%s / plain: peak RSS %.2fx, step time %.2fx, CPU time %.2fx" % (
                name, r.peak_rss_mb / plain.peak_rss_mb, r.step_s / plain.step_s,
                r.cpu_s / plain.cpu_s))
    return lines


def benchmark_memory(options, log=print_line):
    """Measure every configuration, each in its own process; report lines go to ``log``.
    Returns ``{configuration: MemoryFigures}``."""
    # A bad config is the user's error: one line here, not a child's traceback.
    get_model(options.network, data_shape=options.shape)
    log("%s, batch %d, data shape %d, median of %d steps after %d warm-up, each "
        "configuration in a fresh process, OMP_NUM_THREADS=%s" % (
            options.network, options.batch_size, options.shape, options.steps,
            options.warmup, os.environ.get("OMP_NUM_THREADS")))
    results = {name: measure_in_child(options, name) for name in options.configurations}
    for line in report_lines(results):
        log(line)
    return results


def _child(request):
    """The child side of :func:`measure_in_child`: figures as one JSON line on stdout."""
    request = json.loads(request)
    options = request["options"]
    options = MemoryBenchmarkOptions(**dict(options,
                                            configurations=tuple(options["configurations"])))
    print(json.dumps(dataclasses.asdict(measure(options, request["configuration"]))))


if __name__ == "__main__":
    _child(sys.argv[1])
