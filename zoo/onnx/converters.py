"""ONNX conversions of the MXNet operators that MXNet's exporter (``mx.onnx``) lacks or
converts with other semantics, registered into it for opset :data:`OPSET`.

Each conversion reproduces its operator's CPU semantics in MXNet 1.9.1, which the tests
check operator by operator against MXNet:

- ``_contrib_MultiBoxPrior``: the anchors, computed by MXNet at export time, as a constant.
- ``_contrib_MultiBoxDetection``: the best class of each anchor, scores below ``threshold``
  dropped, decoding with the variances and clipping to [0, 1], the ``nms_topk`` best,
  NMS with ONNX's ``NonMaxSuppression`` per class (across classes with ``force_suppress``).
- ``_contrib_box_nms``: sorting, ``valid_thresh``, ``topk`` and NMS per ``id_index`` class
  (MXNet's exporter suppresses across classes whatever ``id_index`` says).
- ``_contrib_ROIAlign``: ONNX's ``RoiAlign`` in MXNet's coordinates (the exporter leaves
  the newer opsets' default, shifted by half a pixel) and adaptive sampling for -1.
- ``_full`` and ``_greater_equal_scalar``, which the exporter lacks.

Kept rows come first, highest score first, and empty rows are -1, as in ``box_nms``;
``MultiBoxDetection`` leaves a suppressed row in place with class -1, which is the same set
of detections. ``NonMaxSuppression`` processes candidates in the order of scores that
encode their rank, so that equal scores keep MXNet's stable order. One difference remains:
``MultiBoxDetection`` suppresses at IoU >= ``nms_threshold``, ONNX at IoU > it, which
differs only for an IoU exactly equal to the threshold.
"""
import contextlib
import contextvars

import mxnet as mx
import numpy as np
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph
from onnx import TensorProto, helper, numpy_helper

__all__ = ["input_shapes", "register"]

OPSET = 13
"""The opset the conversions are registered at; MXNet's exporter writes the newest opset of
the installed onnx and falls back to conversions registered at lower ones."""
INT_MAX = np.iinfo(np.int64).max

_INPUT_SHAPES = contextvars.ContextVar("zoo_onnx_input_shapes", default=None)
"""While :func:`input_shapes` is active: the inferred shape of every MXNet node output, by
``"node_name:index"``, for the conversions that need a static shape."""


@contextlib.contextmanager
def input_shapes(symbol, **data_shapes):
    """Make the shapes of all of ``symbol``'s node outputs at ``data_shapes`` known to the
    conversions while exporting."""
    internals = symbol.get_internals()
    _, shapes, _ = internals.infer_shape_partial(**data_shapes)
    token = _INPUT_SHAPES.set(dict(zip(internals.list_outputs(), shapes)))
    try:
        yield
    finally:
        _INPUT_SHAPES.reset(token)


class Nodes:
    """ONNX nodes and constants of one MXNet node's conversion, named after it."""

    def __init__(self, node, kwargs):
        self.name = node["name"]
        self.attrs = node.get("attrs", {})
        lookup = kwargs["outputs_lookup"]
        self.inputs = [lookup[i[0]][i[1]].name for i in node["inputs"]]
        self.input_keys = [_output_keys(kwargs["mx_graph"], *i[:2]) for i in node["inputs"]]
        self.initializer = kwargs["initializer"]
        self.nodes = []

    def _fresh(self, what):
        return "%s__%s%d" % (self.name, what, len(self.nodes) + len(self.initializer))

    def const(self, values, dtype=np.int64):
        name = self._fresh("const")
        self.initializer.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def op(self, op_type, *inputs, outputs=1, output=None, **attrs):
        """Append an ``op_type`` node; its output name (a list for ``outputs`` > 1).
        ``output`` names the single output (the converted node's result)."""
        names = [output] if output else ["%s_%d" % (self._fresh(op_type.lower()), k)
                                         for k in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names if outputs > 1 else names[0]

    def attr(self, key, default, kind=str):
        value = self.attrs.get(key)
        if value is None:
            return default
        if kind is bool:
            return value in ("True", "true", "1")
        return kind(value)

    def unsupported(self, what):
        return NotImplementedError("ONNX export of %s (%s): %s is not supported"
                                   % (self.name, self.attrs, what))


def _output_keys(graph, index, output):
    """The names ``symbol.get_internals()`` may give output ``output`` of node ``index``
    (``name_output`` for an operator of one output, ``name_output<k>`` for one of several)."""
    node = graph[index]
    if node["op"] == "null":
        return (node["name"],)
    return ("%s_output%d" % (node["name"], output),) + (
        ("%s_output" % node["name"],) if output == 0 else ())


def register(op_name):
    """Register a conversion ``f(Nodes)`` for MXNet's ``op_name`` (replacing MXNet's own);
    ``f`` returns the output's numpy dtype where the node has no input to take it from."""
    def wrapper(convert):
        def mx2onnx(node, **kwargs):
            nodes = Nodes(node, kwargs)
            dtype = convert(nodes)
            return nodes.nodes if dtype is None else (nodes.nodes, (dtype,))
        MXNetGraph.registry_.setdefault(OPSET, {})[op_name] = mx2onnx
        return convert
    return wrapper


def _parse_floats(text):
    return [float(v) for v in text.strip("()[] ").split(",") if v.strip()]


@register("_full")
def convert_full(g):
    shape = [int(v) for v in _parse_floats(g.attrs["shape"])]
    dtype = np.dtype(g.attr("dtype", "float32"))
    g.op("Identity", g.const(np.full(shape, float(g.attrs["value"]), dtype), dtype),
         output=g.name)
    return dtype


@register("_greater_equal_scalar")
def convert_greater_equal_scalar(g):
    at_least = g.op("GreaterOrEqual", g.inputs[0], g.const(g.attr("scalar", 0.0, float),
                                                            np.float32))
    g.op("Cast", at_least, to=TensorProto.FLOAT, output=g.name)


@register("_contrib_MultiBoxPrior")
def convert_multibox_prior(g):
    shapes = _INPUT_SHAPES.get() or {}
    shape = next((shapes[key] for key in g.input_keys[0] if key in shapes), None)
    if not shape:
        raise g.unsupported("an anchor grid without a known input shape (export under "
                            "zoo.onnx.converters.input_shapes)")
    params = {k: v for k, v in g.attrs.items() if k in ("sizes", "ratios", "clip", "steps",
                                                         "offsets")}
    anchors = mx.nd.contrib.MultiBoxPrior(mx.nd.zeros(shape), **params).asnumpy()
    g.op("Identity", g.const(anchors, np.float32), output=g.name)


def _columns(g, x):
    """The four ``(..., 1)`` columns of ``x`` ``(..., 4)`` (``Split`` changed its inputs
    between opsets)."""
    return [g.op("Slice", x, g.const([k]), g.const([k + 1]), g.const([-1])) for k in range(4)]


def _decoded_anchors(g, loc_pred, anchors, variances, clip):
    """``MultiBoxDetection``'s decoding: ``(B, N, 4)`` corners of ``anchors`` ``(1, N, 4)``
    moved by ``loc_pred`` ``(B, 4N)``, in MXNet's order of operations."""
    deltas = g.op("Reshape", loc_pred, g.const([0, -1, 4]))
    al, at, ar, ab = _columns(g, anchors)
    px, py, pw, ph = _columns(g, deltas)
    half = g.const(2.0, np.float32)
    aw, ah = g.op("Sub", ar, al), g.op("Sub", ab, at)
    ax = g.op("Div", g.op("Add", al, ar), half)
    ay = g.op("Div", g.op("Add", at, ab), half)
    vx, vy, vw, vh = (g.const(v, np.float32) for v in variances)
    ox = g.op("Add", g.op("Mul", g.op("Mul", px, vx), aw), ax)
    oy = g.op("Add", g.op("Mul", g.op("Mul", py, vy), ah), ay)
    ow = g.op("Div", g.op("Mul", g.op("Exp", g.op("Mul", pw, vw)), aw), half)
    oh = g.op("Div", g.op("Mul", g.op("Exp", g.op("Mul", ph, vh)), ah), half)
    corners = [g.op("Sub", ox, ow), g.op("Sub", oy, oh), g.op("Add", ox, ow), g.op("Add", oy, oh)]
    if clip:
        corners = [g.op("Clip", c, g.const(0.0, np.float32), g.const(1.0, np.float32))
                   for c in corners]
    return g.op("Concat", *corners, axis=2)


@register("_contrib_MultiBoxDetection")
def convert_multibox_detection(g):
    if g.attr("background_id", 0, int) != 0:
        raise g.unsupported("a background class other than 0")
    cls_prob, loc_pred, anchors = g.inputs
    foreground = g.op("Slice", cls_prob, g.const([1]), g.const([INT_MAX]), g.const([1]))
    # ArgMax takes the first of equal scores, as MultiBoxDetection's strict comparison does.
    best = g.op("ArgMax", foreground, axis=1, keepdims=1)
    score = g.op("Squeeze", g.op("GatherElements", foreground, best, axis=1), g.const([1]))
    label = g.op("Cast", g.op("Squeeze", best, g.const([1])), to=TensorProto.FLOAT)
    boxes = _decoded_anchors(g, loc_pred, anchors,
                             _parse_floats(g.attr("variances", "(0.1, 0.1, 0.2, 0.2)")),
                             g.attr("clip", True, bool))
    rows = g.op("Concat", g.op("Unsqueeze", label, g.const([2])),
                g.op("Unsqueeze", score, g.const([2])), boxes, axis=2)
    valid = g.op("GreaterOrEqual", score, g.const(g.attr("threshold", 0.01, float), np.float32))
    _sorted_nms(g, rows, score, valid, coord_start=2,
                id_index=None if g.attr("force_suppress", False, bool) else 0,
                topk=g.attr("nms_topk", -1, int),
                overlap=g.attr("nms_threshold", 0.5, float), output=g.name)


@register("_contrib_box_nms")
def convert_box_nms(g):
    if g.attr("in_format", "corner") != "corner" or g.attr("out_format", "corner") != "corner":
        raise g.unsupported("a box format other than corner")
    if g.attr("background_id", -1, int) != -1:
        raise g.unsupported("a background_id")
    rows = g.inputs[0]
    score = g.op("Gather", rows, g.const(g.attr("score_index", 1, int)), axis=2)
    valid = g.op("Greater", score, g.const(g.attr("valid_thresh", 0.0, float), np.float32))
    id_index = g.attr("id_index", -1, int)
    class_aware = id_index >= 0 and not g.attr("force_suppress", False, bool)
    _sorted_nms(g, rows, score, valid, coord_start=g.attr("coord_start", 2, int),
                id_index=id_index if class_aware else None, topk=g.attr("topk", -1, int),
                overlap=g.attr("overlap_thresh", 0.5, float),
                output=g.name + "0")  # the first of box_nms's two outputs


@register("_contrib_ROIAlign")
def convert_roi_align(g):
    if g.attr("position_sensitive", False, bool):
        raise g.unsupported("position-sensitive pooling")
    height, width = (int(v) for v in _parse_floats(g.attrs["pooled_size"]))
    feature, rois = g.inputs
    batch = g.op("Squeeze", g.op("Slice", rois, g.const([0]), g.const([1]), g.const([1])),
                 g.const([1]))
    boxes = g.op("Slice", rois, g.const([1]), g.const([5]), g.const([1]))
    # A ROI of batch index -1 is skipped by MXNet and left to the graph to mask; here it is
    # pooled on image 0 and zeroed.
    pooled = g.op("RoiAlign", feature, boxes,
                  g.op("Cast", g.op("Relu", batch), to=TensorProto.INT64), mode="avg",
                  output_height=height, output_width=width,
                  sampling_ratio=max(0, g.attr("sample_ratio", -1, int)),
                  spatial_scale=g.attr("spatial_scale", 1.0, float),
                  coordinate_transformation_mode=("half_pixel" if g.attr("aligned", False, bool)
                                                  else "output_half_pixel"))
    skipped = g.op("Less", g.op("Unsqueeze", batch, g.const([1, 2, 3])),
                   g.const(0.0, np.float32))
    g.op("Where", skipped, g.const(0.0, np.float32), pooled, output=g.name)


def _gather_rows(g, rows, index):
    """``rows`` ``(B, N, W)`` at ``index`` ``(B, K)``: ``(B, K, W)``."""
    width = g.op("Slice", g.op("Shape", rows), g.const([2]), g.const([3]))
    shape = g.op("Concat", g.op("Shape", index), width, axis=0)
    return g.op("GatherElements", rows, g.op("Expand", g.op("Unsqueeze", index, g.const([2])),
                                              shape), axis=1)


def _per_class_scores(g, candidates, id_index, rank):
    """``(B, C, K)`` NMS scores: each candidate's ``rank`` in the row of its class (column
    ``id_index``), 0 in the others; C is one more than the largest class id."""
    label = g.op("Gather", candidates, g.const(id_index), axis=2)
    largest = g.op("Max", g.op("ReduceMax", label, keepdims=0), g.const(0.0, np.float32))
    count = g.op("Add", g.op("Cast", largest, to=TensorProto.INT64), g.const(1))
    classes = g.op("Cast", g.op("Range", g.const(0), count, g.const(1)), to=TensorProto.FLOAT)
    member = g.op("Equal", g.op("Unsqueeze", label, g.const([1])),
                  g.op("Unsqueeze", classes, g.const([0, 2])))
    return g.op("Where", member, g.op("Unsqueeze", rank, g.const([1])), g.const(0.0, np.float32))


def _sorted_nms(g, rows, score, valid, coord_start, id_index, topk, overlap, output):
    """``output``: ``rows`` ``(B, N, W)`` with the ``topk`` best valid ones
    by ``score`` after NMS first, best first, then rows of -1."""
    count = g.op("Slice", g.op("Shape", rows), g.const([1]), g.const([2]))
    kept_count = g.op("Min", count, g.const([topk])) if topk > 0 else count
    ranked = g.op("Where", valid, score, g.const(-np.inf, np.float32))
    top_score, order = g.op("TopK", ranked, kept_count, axis=1, largest=1, sorted=1, outputs=2)
    candidates = _gather_rows(g, rows, order)
    in_play = g.op("Greater", top_score, g.const(-np.inf, np.float32))
    # Scores that encode the rank (K for the best ... 1), so that NMS visits the candidates in
    # TopK's order, which keeps equal scores in MXNet's order; 0 marks an invalid one.
    steps = g.op("Squeeze", kept_count, g.const([0]))
    rank = g.op("Cast", g.op("Range", steps, g.const(0), g.const(-1)), to=TensorProto.FLOAT)
    rank = g.op("Where", in_play, g.op("Unsqueeze", rank, g.const([0])),
                g.const(0.0, np.float32))
    nms_scores = (g.op("Unsqueeze", rank, g.const([1])) if id_index is None
                  else _per_class_scores(g, candidates, id_index, rank))
    boxes = g.op("Slice", candidates, g.const([coord_start]), g.const([coord_start + 4]),
                 g.const([2]))
    selected = g.op("NonMaxSuppression", boxes, nms_scores, kept_count,
                    g.const([overlap], np.float32), g.const([0.5], np.float32))
    where = g.op("Gather", selected, g.const([0, 2]), axis=1)
    ones = g.op("ConstantOfShape", g.op("Slice", g.op("Shape", selected), g.const([0]),
                                        g.const([1])),
                value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]))
    kept = g.op("ScatterND", g.op("Mul", rank, g.const(0.0, np.float32)), where, ones)
    _, position = g.op("TopK", g.op("Mul", kept, rank), kept_count, axis=1, largest=1,
                       sorted=1, outputs=2)
    survivor = g.op("Greater", g.op("GatherElements", kept, position, axis=1),
                    g.const(0.0, np.float32))
    out = g.op("Where", g.op("Unsqueeze", survivor, g.const([2])),
               _gather_rows(g, candidates, position), g.const(-1.0, np.float32))
    missing = g.op("Sub", count, kept_count)
    pads = g.op("Concat", g.const([0, 0, 0, 0]), missing, g.const([0]), axis=0)
    g.op("Pad", out, pads, g.const(-1.0, np.float32), mode="constant", output=output)

