"""Memory-saving training: keep a few activations and recompute the others in backward.

MXNet 1.x recomputes ("mirrors") in the backward pass every operator whose
``__force_mirroring__`` attribute is true, from the nearest outputs that were kept.
Its global switch ``MXNET_BACKWARD_DO_MIRROR=1`` mirrors every operator except
convolutions, which saves nothing in a convolutional network: a convolution's
backward needs its input, which is the very ReLU output the mirror would drop, so
the same tensors stay alive and the recomputed copies come on top. On ssd_resnet101,
batch 8 at 300, MXNet plans 1952 MB of intermediate arrays without it, 2287 MB with
it, and 1952 MB again when only the batch norms and ReLUs are mirrored.

What saves memory is segment-wise recomputation (Chen et al., "Training deep nets
with sublinear memory cost", 2016): mirror the convolutions too, everything but a few
checkpoints. A checkpoint is a cut point of the forward graph (in a ResNet a unit's
output), where one tensor carries everything later layers need, and one whose
backward reads only its output (ReLU, sum, concatenation), so that keeping it keeps
nothing else. Backward then recomputes one segment at a time from its checkpoint, at
the cost of about one more forward pass of the recomputed part; the same case plans
537 MB. Segments are cut to hold about equal activation memory; of several segment
sizes, the one with the smallest plan in MXNet's own memory planner is kept.
"""
import copy
import json
import logging
import math
import re

import mxnet as mx
import numpy as np

__all__ = ["ForwardGraph", "LOG", "MIRROR_ATTR", "MemoryPlanner", "RUNTIME_MB",
           "TrainingMemory", "available_memory_mb", "memory_saving_symbol"]

LOG = logging.getLogger("zoo.engine.memory")
MIRROR_ATTR = "__force_mirroring__"
# Deterministic layers: recomputing them in backward reproduces the forward exactly.
# Anything else (random sampling, custom Python operators, losses) is kept. Batch norm
# updates its running statistics in its backward, which runs once either way.
RECOMPUTABLE_OPS = frozenset((
    "Activation", "BatchNorm", "Concat", "Convolution", "Deconvolution", "Flatten",
    "FullyConnected", "L2Normalization", "LeakyReLU", "Pooling", "Reshape", "broadcast_mul",
    "clip", "elemwise_add", "transpose"))
# Segment memory budgets tried, as fractions of the recomputable activations: 0 keeps
# every checkpoint candidate, larger budgets make fewer, longer segments. MXNet's planner
# shares blocks by size classes, so its total is not monotonic in the budget: try many.
BUDGET_FRACTIONS = (0.0,) + tuple(2.0 ** (-k / 2) for k in range(2, 13))
RUNTIME_MB = 600
"""Resident megabytes of a training process besides its graph's planned arrays and its
parameters' copies (:class:`TrainingMemory`): MXNet's and Python's code, the loader's
decoded photos. Measured (busy 2-core machine, ``/usr/bin/time -v``, 2 steps):
faster_rcnn_fpn_resnet50 at 320 (320x1000 input, 41.5 M parameters) peaked at 1830 MB at
batch 1 and 2444 MB at batch 2, against planned 881 and 1764 MB plus 474 MB of parameter
copies: the estimate is 10-15% above the peak, and 15.1 GB at batch 16, where a user's run
peaked at 14 GB."""
PARAMETER_COPIES = 3
"""Arrays of a parameter's size a training step holds: the weights, their gradients and
the optimizer's state (sgd's momentum)."""
MEMINFO = "/proc/meminfo"
CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current")


def executor_memory_mb(executor):
    """Megabytes MXNet's memory planner allocated for ``executor``'s intermediate arrays
    (activations, their gradients and workspace; parameters not included)."""
    match = re.search(r"Total (\d+) MB allocated", executor.debug_str())
    return int(match.group(1))


class MemoryPlanner:
    """Reads MXNet's memory plan of training graphs that share ``symbol``'s arguments.

    Every bind reuses one set of uninitialised arrays: binding then touches no memory
    (``simple_bind`` would queue zero-fills of fresh parameter and gradient arrays, which
    the engine runs later, and a peak-memory figure would count them).
    """

    def __init__(self, symbol, input_shapes, fixed_params=()):
        arg_shapes, _, aux_shapes = symbol.infer_shape(**input_shapes)
        names = symbol.list_arguments()
        self.args = {name: mx.nd.empty(shape) for name, shape in zip(names, arg_shapes)}
        self.grads = {name: mx.nd.empty(shape) for name, shape in zip(names, arg_shapes)
                      if name not in input_shapes and name not in fixed_params}
        self.grad_req = {name: "write" if name in self.grads else "null" for name in names}
        self.aux = [mx.nd.empty(shape) for shape in aux_shapes]

    def planned_mb(self, symbol):
        """:func:`executor_memory_mb` of ``symbol`` bound for training on the CPU, with no
        gradient for the inputs and the fixed parameters."""
        executor = symbol.bind(mx.cpu(), self.args, args_grad=self.grads,
                               grad_req=self.grad_req, aux_states=self.aux)
        return executor_memory_mb(executor)


class ForwardGraph:
    """The operators of a symbol in topological order, with what segmenting needs to know:
    their output sizes, which need a gradient and which are cut points."""

    def __init__(self, symbol, input_shapes, fixed_params=()):
        # A bfloat16 graph's casts are operators too (tojson leaves them out by default).
        self.json = json.loads(symbol.tojson(remove_amp_cast=False))
        self.nodes = self.json["nodes"]
        self.ops = [i for i, node in enumerate(self.nodes) if node["op"] != "null"]
        trainable = set(symbol.list_arguments()) - set(input_shapes) - set(fixed_params)
        self.needs_gradient = self._needing_gradient(trainable)
        self.cut_points = self._cut_points()
        self.candidates = self._checkpoint_candidates()
        self.last_candidate = self.candidates[-1] if self.candidates else -1
        internals = symbol.get_internals()
        _, shapes, _ = internals.infer_shape(**input_shapes)
        _, types, _ = internals.infer_type(**dict.fromkeys(input_shapes, np.float32))
        sizes = {name: np.dtype(dtype or np.float32).itemsize * math.prod(shape)
                 for name, shape, dtype in zip(internals.list_outputs(), shapes, types)}
        self.output_bytes = {i: sizes.get(self.nodes[i]["name"] + "_output", 0)
                             for i in self.ops}

    def _needing_gradient(self, trainable):
        """Operators that have a trainable parameter upstream, so have a backward."""
        needs = set()
        for i in self.ops:
            for source, _, _ in self.nodes[i]["inputs"]:
                node = self.nodes[source]
                if source in needs or (node["op"] == "null" and node["name"] in trainable):
                    needs.add(i)
                    break
        return needs

    def _cut_points(self):
        """Operators after which no earlier operator's output is read again: everything
        the rest of the graph needs from before is this operator's output."""
        last_read = {i: i for i in self.ops}
        for i in self.ops:
            for source, _, _ in self.nodes[i]["inputs"]:
                if source in last_read:
                    last_read[source] = i
        for source, _, _ in self.json["heads"]:
            last_read[source] = len(self.nodes)
        cuts, still_read_until = [], -1
        for i in self.ops:
            if still_read_until <= i:
                cuts.append(i)
            still_read_until = max(still_read_until, last_read[i])
        return cuts

    def _checkpoint_candidates(self):
        """Cut points worth keeping: those whose backward reads only their output, so that
        keeping one keeps nothing else (a kept operator's backward reads the forward's own
        inputs, not recomputed ones: keeping a pooling would keep its input too)."""
        return [i for i in self.cut_points
                if self.nodes[i]["op"] in ("elemwise_add", "Concat")
                or (self.nodes[i]["op"] == "Activation"
                    and self.nodes[i].get("attrs", {}).get("act_type") == "relu")]

    def recomputable(self):
        """Operators that may be recomputed: those with a backward, up to the last checkpoint
        candidate. Beyond it several tensors stay alive to the end of the forward (SSD's
        feature maps), so recomputing would only add copies."""
        return [i for i in self.ops if i <= self.last_candidate and i in self.needs_gradient
                and self.nodes[i]["op"] in RECOMPUTABLE_OPS]

    def mirrored(self, budget_bytes):
        """Recomputable operators but the checkpoints: the last candidate, and each candidate
        at which a segment's recomputable outputs first exceed ``budget_bytes``."""
        candidates = set(self.candidates)
        mirrored, segment_bytes = [], 0
        for i in self.recomputable():
            segment_bytes += self.output_bytes[i]
            if i == self.last_candidate or (i in candidates and segment_bytes > budget_bytes):
                segment_bytes = 0
            else:
                mirrored.append(i)
        return mirrored

    def marked_symbol(self, mirrored):
        """The symbol with the operators ``mirrored`` (indices) marked for recomputation."""
        graph = copy.deepcopy(self.json)
        for i in mirrored:
            graph["nodes"][i].setdefault("attrs", {})[MIRROR_ATTR] = "True"
        return mx.sym.load_json(json.dumps(graph))


def memory_saving_symbol(symbol, input_shapes, fixed_params=()):
    """``symbol`` (a training graph) marked for segment-wise recomputation in backward,
    with the segment size that gives the smallest memory plan for ``input_shapes``
    (inputs and label). Losses, gradients and batch-norm statistics are unchanged."""
    graph = ForwardGraph(symbol, input_shapes, fixed_params)
    planner = MemoryPlanner(symbol, input_shapes, fixed_params)
    total = sum(graph.output_bytes[i] for i in graph.recomputable())
    plans = []
    for fraction in BUDGET_FRACTIONS:
        mirrored = graph.mirrored(fraction * total)
        marked = graph.marked_symbol(mirrored)
        plans.append((planner.planned_mb(marked), fraction, len(mirrored), marked))
    best_mb, fraction, count, marked = min(plans, key=lambda plan: plan[:2])
    LOG.info("memory saving: %d of %d operators recomputed in backward (segment budget "
             "%.0f MB): %d MB of planned intermediate arrays instead of %d MB", count,
             len(graph.ops), fraction * total / 2 ** 20, best_mb, planner.planned_mb(symbol))
    return marked


class TrainingMemory:
    """Estimates the peak resident memory of training ``model`` on the CPU at a batch size:
    MXNet's plan of the training graph's intermediate arrays at that batch (bound on
    unallocated arrays: nothing is touched, :class:`MemoryPlanner`), the parameters'
    :data:`PARAMETER_COPIES`, and :data:`RUNTIME_MB`. Every parameter counted trainable and
    fp32: an upper bound for frozen layers and bf16."""

    def __init__(self, model, max_objects):
        self.model, self.max_objects = model, max_objects
        self.symbol = model.train_symbol()
        self.parameters_mb = PARAMETER_COPIES * model.num_params() * 4 / 2 ** 20

    def mb(self, batch_size):
        shapes = self.model.train_input_shapes(batch_size, self.max_objects)
        planned = MemoryPlanner(self.symbol, shapes).planned_mb(self.symbol)
        return planned + self.parameters_mb + RUNTIME_MB

    def largest_batch(self, budget_mb, most):
        """``(batch, mb)``: the largest batch up to ``most`` whose estimate is within
        ``budget_mb`` (planned arrays grow with the batch), or ``(0, estimate of 1)``."""
        for batch in range(most, 0, -1):
            mb = self.mb(batch)
            if mb <= budget_mb:
                return batch, mb
        return 0, mb


def available_memory_mb():
    """Megabytes this process may still take: the kernel's MemAvailable, or less where a
    cgroup (a container's limit) leaves less."""
    with open(MEMINFO) as stream:
        available = next(int(line.split()[1]) / 1024 for line in stream
                         if line.startswith("MemAvailable:"))
    try:
        limit, used = (read_line(path) for path in CGROUP_FILES)
    except OSError:
        return available
    if limit == "max":
        return available
    return min(available, (int(limit) - int(used)) / 2 ** 20)


def read_line(path):
    with open(path) as stream:
        return stream.read().strip()
