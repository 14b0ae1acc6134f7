"""Where a detector's inference time goes: each operator of a deployed graph (fp32 or int8)
timed as it runs, summed into the parts of a detector by operator name.

The parts follow the graphs' naming (see symbols.backbones): ``fpn_*`` the feature pyramid,
``rpn_conv*``/``rpn_cls_score*``/``rpn_bbox_pred*`` the RPN head and every other ``rpn_*``
operator the proposals, ``roi_*`` ROIAlign (with an FPN's assignment of ROIs to levels
and merge of the levels' features), ``head_*`` and the predictor
(``rcnn_cls_score*``, ``rcnn_bbox_pred*``) the box head, every other ``rcnn_*`` operator
decoding and NMS. An operator with none of these names belongs where its inputs do: the
backbone's layers (and a C4 model's head stage, which runs after ROIAlign and so lands in
the box head); quantize and dequantize operators with the layers they feed from.

MXNet's profiler names operators by type (``_sg_mkldnn_conv``), not by node, so the
operators are timed through the executor's monitor callback instead, which names each
node as it finishes: each waits for its output, so the parts add up to about the latency.
"""
import json
from dataclasses import dataclass
from typing import Dict, Tuple

import mxnet as mx

from zoo.predictor import Predictor, fuse
from zoo_bench.flops import flops_by_layer
from zoo_bench.timing import Stopwatch, mean_seconds

__all__ = ["Node", "PARTS", "PartProfile", "format_profile", "graph_nodes", "node_parts",
           "part_gflops", "profile_graph"]

PARTS = ("backbone", "fpn", "rpn head", "proposals", "roi align", "box head", "nms+decode")
# (name prefix, part), the first match wins: specific prefixes before general ones
NAME_RULES = (
    ("fpn_", "fpn"),
    ("rpn_conv", "rpn head"), ("rpn_cls_score", "rpn head"), ("rpn_bbox_pred", "rpn head"),
    ("rpn_", "proposals"),
    ("roi_", "roi align"),
    ("head_", "box head"), ("rcnn_cls_score", "box head"), ("rcnn_bbox_pred", "box head"),
    ("rcnn_", "nms+decode"), ("detection", "nms+decode"),
)


@dataclass(frozen=True)
class Node:
    """One operator of a graph: its node ``name``, the name its part is told by (the first
    layer a fused MKL-DNN node holds, else its own) and the operators it reads."""
    name: str
    layer: str
    inputs: Tuple[str, ...]


@dataclass(frozen=True)
class PartProfile:
    """Milliseconds per image spent in each part, in :data:`PARTS` order, beside the
    part's work (of the fp32 graph, whatever the precision)."""
    subject: str
    batch_size: int
    ms_per_image: Dict[str, float]
    gflops_per_image: Dict[str, float]
    latency_ms_per_image: float   # the same runs end to end, for comparison

    @property
    def total_ms(self):
        return sum(self.ms_per_image.values())


def part_by_name(name):
    """The part an operator's name tells, or None for a name that tells none."""
    return next((part for prefix, part in NAME_RULES if name.startswith(prefix)), None)


def node_parts(nodes):
    """``{node name: part}`` of ``nodes`` (:class:`Node`, in topological order): by name,
    else the latest part among its inputs (ROIAlign's consumers being the box head), else
    the backbone."""
    parts = {}
    for node in nodes:
        part = part_by_name(node.layer)
        if part is None:
            inherited = [PARTS.index(parts[i]) for i in node.inputs if i in parts]
            part = PARTS[max(inherited)] if inherited else "backbone"
            part = "box head" if part == "roi align" else part
        parts[node.name] = part
    return parts


def _first_layer(node):
    inner = [n["name"] for graph in node.get("subgraphs", ()) for n in graph["nodes"]
             if n["op"] != "null"]
    return inner[0] if inner else node["name"]


def graph_nodes(symbol):
    """The operators of ``symbol`` as :class:`Node` s, in topological order (a bfloat16
    graph's casts included: they run, and tojson leaves them out by default)."""
    nodes = json.loads(symbol.tojson(remove_amp_cast=False))["nodes"]
    operators = []
    for node in nodes:
        if node["op"] == "null":
            continue
        inputs = tuple(nodes[i[0]]["name"] for i in node["inputs"] if nodes[i[0]]["op"] != "null")
        operators.append(Node(node["name"], _first_layer(node), inputs))
    return operators


def part_gflops(symbol, input_shapes):
    """``{part: GFLOPs per image}`` of the convolutions and fully connected layers of
    ``symbol`` (unfused) on inputs of ``input_shapes`` (batch 1)."""
    parts = node_parts(graph_nodes(symbol))
    gflops = dict.fromkeys(PARTS, 0.0)
    for layer, flops in flops_by_layer(symbol, **input_shapes).items():
        gflops[parts[layer]] += flops / 1e9
    return gflops


def node_of(output_name, node_names):
    """The node an output (``<node>_output``, ``<node>_output0``...) belongs to."""
    name = output_name
    while name not in node_names and "_" in name:
        name = name.rsplit("_", 1)[0]
    return name if name in node_names else output_name


def operator_seconds(executor, run, node_names):
    """``{node name: seconds}`` of one ``run()`` of ``executor``, each operator waited for
    as the monitor callback reports its output."""
    seconds, watch = {}, Stopwatch()

    def finished(output_name, handle):
        mx.nd.NDArray(mx.base.NDArrayHandle(handle), writable=False).wait_to_read()
        name = node_of(output_name.decode(), node_names)
        seconds[name] = seconds.get(name, 0.0) + watch()
        watch.restart()
    executor.set_monitor_callback(finished)
    watch.restart()
    run()
    return seconds


def part_seconds(parts, seconds):
    """``{part: seconds}`` (every part of :data:`PARTS`) of ``{node name: seconds}``."""
    unknown = set(seconds) - set(parts)
    if unknown:
        raise ValueError("operators %s are not in the profiled graph" % ", ".join(sorted(unknown)))
    totals = dict.fromkeys(PARTS, 0.0)
    for name, spent in seconds.items():
        totals[parts[name]] += spent
    return totals


def profile_graph(subject, symbol, arg_params, aux_params, inputs, gflops, runs=2):
    """The :class:`PartProfile` of ``symbol`` deployed (MKL-DNN fused) on ``inputs`` (numpy
    arrays by name), the mean of ``runs`` after one untimed run; ``gflops`` is
    :func:`part_gflops` of its fp32 graph."""
    fused = fuse(symbol)
    predictor = Predictor(fused, arg_params, aux_params)
    parts = node_parts(graph_nodes(fused))

    def run():
        return [output.wait_to_read() for output in predictor(**inputs)]
    run()
    latency = mean_seconds(run, runs)
    # a separate executor object would plan its own memory: time the one just measured
    executor = predictor.executor({name: value.shape for name, value in inputs.items()})
    totals = dict.fromkeys(PARTS, 0.0)
    for _ in range(runs):
        for part, spent in part_seconds(parts, operator_seconds(executor, run, set(parts))).items():
            totals[part] += spent
    batch_size = len(inputs["data"])
    to_ms_per_image = 1000.0 / runs / batch_size
    return PartProfile(subject, batch_size,
                       {part: spent * to_ms_per_image for part, spent in totals.items()},
                       gflops, latency * 1000.0 / batch_size)


def format_profile(profile):
    """Report lines: one per part with its time per image, share, work and rate, then the
    total."""
    lines = ["profile of %s at batch %d (per image):" % (profile.subject, profile.batch_size)]
    for part, ms in profile.ms_per_image.items():
        gflops = profile.gflops_per_image[part]
        lines.append("  %-12s %9.1f ms %5.1f%% %7.1f GFLOPs %7.1f GFLOP/s" % (
            part, ms, 100 * ms / profile.total_ms, gflops, gflops / ms * 1000 if ms else 0))
    lines.append("  %-12s %9.1f ms        %7.1f GFLOPs (end to end without the per-operator "
                 "waits: %.1f ms)" % ("total", profile.total_ms,
                                      sum(profile.gflops_per_image.values()),
                                      profile.latency_ms_per_image))
    return lines
