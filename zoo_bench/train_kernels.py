"""Where the time of our training step goes by precision (``zoo benchmark-train``): one
more round of our side with every operator of the bound training graph, forward and
backward, timed as it finishes (the executors' monitor callback names each node's outputs;
each is waited for, so the operators add up to the graph's time), each sorted by what it
is (:data:`CATEGORIES`): a layer whose output is bfloat16, a layer in fp32, AMP's casts,
anchors and target assignment, losses, and the rest of the graph (reshapes of the heads'
outputs, proposals, ROIAlign...). The optimizer's update, the data and the metrics are the
round's own parts (:class:`zoo_bench.train_parts.PartClock`).

Beside it, the work: the multiply-adds of the convolutions and fully connected layers, three
times the forward's per step (forward, gradient of the input, gradient of the weight), as
GFLOP/s over the time of the layers that ran them, against the machine's peak of their
precision (:func:`zoo_bench.inference.bf16_matmul_peak_gflops`, best of several probes).
"""
import json
from dataclasses import dataclass, field
from typing import Dict

import mxnet as mx
import numpy as np
from mxnet.contrib.amp.amp import bfloat16

from zoo_bench.flops import flops_by_layer
from zoo_bench.profile import node_of
from zoo_bench.timing import Stopwatch
from zoo.engine import module_adapter

__all__ = ["BF16", "CATEGORIES", "FP32", "OTHER", "KernelClock", "KernelProfile", "category",
           "layer_flops", "lines", "peak_lines"]

BF16, FP32, OTHER = "bf16 layers", "fp32 layers", "other graph ops"
CATEGORIES = (BF16, FP32, "casts", "targets", "losses", OTHER)
CAST_OPS = ("amp_cast", "amp_multicast")
TARGET_OPS = ("_contrib_MultiBoxTarget", "_contrib_MultiBoxPrior", "Custom")
"""Anchors and target assignment (Faster R-CNN's are Python custom operators)."""
LOSS_OPS = ("SoftmaxOutput", "smooth_l1", "MakeLoss", "LinearRegressionOutput",
            "LogisticRegressionOutput")
LAYER_OPS = ("Convolution", "Deconvolution", "FullyConnected", "BatchNorm", "Activation",
             "LeakyReLU", "clip", "Pooling", "elemwise_add", "add_n", "L2Normalization",
             "UpSampling")
WEIGHTED_OPS = ("Convolution", "FullyConnected")
GRADIENT_SUM = "sum_grad"
"""The name of the nodes the backward pass adds to sum a tensor's gradients."""
OTHERS_SHOWN = 4
"""Operators of "other graph ops" the report names, the slowest first."""
PASSES_PER_STEP = 3
"""Forward, gradient of the input, gradient of the weight: each as many multiply-adds."""


def category(op, name, dtype):
    """Which of :data:`CATEGORIES` a node of operator ``op`` belongs to; ``dtype`` is the
    type of its (first) output. The inputs of anchor generators
    (:func:`zoo.engine.precision.bf16_training_symbol`) are anchors' work."""
    if op in CAST_OPS:
        return "casts"
    if np.dtype(dtype) == np.dtype(bfloat16):
        return BF16
    if op in TARGET_OPS or name.endswith(("_shape_source", "_shape_source_nograd")):
        return "targets"
    if op in LOSS_OPS:
        return "losses"
    if op in LAYER_OPS:
        return FP32
    return OTHER


@dataclass(frozen=True)
class KernelProfile:
    """One monitored round: milliseconds per step of each of :data:`CATEGORIES`, of the
    round's own parts (``update``, ...) and of the whole step; GFLOPs per step of the
    layers of each precision."""
    ms_per_step: Dict[str, float]
    parts_ms_per_step: Dict[str, float]
    step_ms: float
    gflops_per_step: Dict[str, float] = field(default_factory=dict)
    layers: Dict[str, int] = field(default_factory=dict)
    other_ms_per_step: Dict[str, float] = field(default_factory=dict)   # by operator

    def share(self, ms):
        return ms / self.step_ms if self.step_ms else 0.0

    def gflops_per_s(self, precision):
        """GFLOP/s of the layers of ``precision`` (:data:`BF16` or :data:`FP32`) over their
        time."""
        ms = self.ms_per_step.get(precision, 0.0)
        return self.gflops_per_step.get(precision, 0.0) / ms * 1e3 if ms else 0.0


class KernelClock:
    """Times every operator of a module's executors from :meth:`install` on."""

    def __init__(self):
        self.nodes = {}          # node name -> operator, of the bound graph
        self.seconds = dict.fromkeys(CATEGORIES, 0.0)
        self.other_ops = {}      # operator -> seconds, of "other graph ops"
        self.precision_of = {}   # weighted layer name -> category of its output
        self.watch = None

    def install(self, module):
        graph = json.loads(module.symbol.tojson(remove_amp_cast=False))
        self.nodes = {node["name"]: node["op"] for node in graph["nodes"]
                      if node["op"] != "null"}
        for executor in module_adapter.executors(module):
            executor.set_monitor_callback(self._finished, monitor_all=False)
        self.watch = Stopwatch()

    def restart(self):
        """Count from now (the time between steps is the round's other parts)."""
        self.watch.restart()

    def _finished(self, output_name, handle):
        array = mx.nd.NDArray(mx.base.NDArrayHandle(handle), writable=False)
        array.wait_to_read()
        name = node_of(output_name.decode(), self.nodes)
        # MXNet's own nodes summing the gradients of a tensor read by several layers
        op = self.nodes.get(name, "add_n" if name.startswith(GRADIENT_SUM) else "")
        kind = category(op, name, array.dtype)
        spent = self.watch()
        self.seconds[kind] += spent
        if kind == OTHER:
            self.other_ops[op or "?"] = self.other_ops.get(op or "?", 0.0) + spent
        if op in WEIGHTED_OPS and name not in self.precision_of:
            self.precision_of[name] = kind
        self.watch.restart()

    def profile(self, round_, flops):
        """The :class:`KernelProfile` of the monitored ``round_`` (a
        :class:`zoo_bench.train_parts.Round`); ``flops`` are the fp32 graph's
        :func:`~zoo_bench.flops.flops_by_layer`."""
        steps = max(round_.steps, 1)
        gflops, layers = {BF16: 0.0, FP32: 0.0}, {BF16: 0, FP32: 0}
        for name, kind in self.precision_of.items():
            if kind in gflops and name in flops:
                gflops[kind] += PASSES_PER_STEP * flops[name] / 1e9
                layers[kind] += 1
        return KernelProfile(
            {kind: 1e3 * seconds / steps for kind, seconds in self.seconds.items()},
            {part: 1e3 * seconds / steps for part, seconds in round_.parts.items()},
            1e3 * round_.seconds / steps, gflops, layers,
            {op: 1e3 * seconds / steps for op, seconds in self.other_ops.items()})


def layer_flops(model, batch_size, max_objects):
    """FLOPs per layer of ``model``'s fp32 training graph at ``batch_size``."""
    return flops_by_layer(model.train_symbol(),
                          **model.train_input_shapes(batch_size, max_objects))


def lines(sides, peaks):
    """Report lines: ms/step and share of each category and of the round's other parts, a
    column per side (``[(name, KernelProfile)]``), then each side's layer rates against
    ``peaks`` (``{"bf16": GFLOP/s, "fp32": GFLOP/s}``)."""
    header = ["where the step goes (one more round each, every operator waited for):",
              "%-22s" % "ms/step (share)" + "".join("%20s" % name for name, _ in sides)]
    rows = [(kind, lambda p, kind=kind: p.ms_per_step.get(kind, 0.0)) for kind in CATEGORIES]
    rows += [("optimizer (update)", lambda p: p.parts_ms_per_step.get("update", 0.0)),
             ("data, metrics, logging", lambda p: sum(
                 p.parts_ms_per_step.get(part, 0.0) for part in ("data", "metrics", "logging")))]
    out = header + ["%-22s" % label + "".join(
        "%12.1f (%4.1f%%)" % (value(p), 100 * p.share(value(p))) for _, p in sides)
        for label, value in rows]
    out.append("%-22s" % "step" + "".join("%12.1f        " % p.step_ms for _, p in sides))
    for name, profile in sides:
        largest = sorted(profile.other_ms_per_step.items(), key=lambda item: -item[1])
        if largest:
            out.append("%s: %s, the largest: %s" % (name, OTHER, ", ".join(
                "%s %.1f ms" % item for item in largest[:OTHERS_SHOWN])))
    for name, profile in sides:
        out += rate_lines(name, profile, peaks)
    return out


def rate_lines(name, profile, peaks):
    """The layers of each precision of side ``name``: their GFLOP/s over their time against
    the peak of that precision; then the whole step's against the peak of the side's main
    precision (bf16 where it has bf16 layers)."""
    out = []
    for kind in (BF16, FP32):
        if profile.layers.get(kind):
            precision = kind.split()[0]
            rate = profile.gflops_per_s(kind)
            out.append("%s: %d %s, %.1f GFLOPs a step (3x the forward's multiply-adds) in "
                       "%.1f ms: %.1f GFLOP/s%s"
                       % (name, profile.layers[kind], kind, profile.gflops_per_step[kind],
                          profile.ms_per_step[kind], rate, of_peak(rate, peaks, precision)))
    main = "bf16" if profile.layers.get(BF16) else "fp32"
    whole = sum(profile.gflops_per_step.values()) / profile.step_ms * 1e3
    out.append("%s: the whole step, %.1f GFLOPs in %.1f ms: %.1f GFLOP/s%s"
               % (name, sum(profile.gflops_per_step.values()), profile.step_ms, whole,
                  of_peak(whole, peaks, main)))
    return out


def of_peak(rate, peaks, precision):
    """``, 12.3% of the bf16 peak`` (nothing without a measured peak)."""
    if precision not in peaks:
        return ""
    return ", %.1f%% of the %s peak" % (100 * rate / peaks[precision], precision)


def peak_lines(peaks, runs):
    if not peaks:
        return []
    return ["matmul peaks on this machine (best of %d probes each): %s" % (runs, ", ".join(
        "%s %.1f GFLOP/s" % (precision, value) for precision, value in sorted(peaks.items())))]

