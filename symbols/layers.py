"""Layer helpers that always name their operators explicitly.

Every helper takes the layer's name and derives the names of the operators it
creates from it, so a graph never contains MXNet's auto-generated names
(``_plus3``, ``convolution12``), which shift with how many symbols were built
earlier in the same process.
"""
import json

import mxnet as mx

__all__ = ["BN_EPS", "BN_MOMENTUM", "BatchNormLayer", "StrictNameManager", "add", "batchnorm",
           "batchnorm_layers", "classifier_head", "concat", "constant", "conv", "conv_bn",
           "dense", "gather_rows", "global_stats_batchnorm", "nms", "one_over_count", "pool",
           "relu", "relu6", "scalar", "scale_gradient", "smooth_l1_loss"]

BN_EPS = 1e-5
BN_MOMENTUM = 0.9


class StrictNameManager(mx.name.NameManager):
    """Name manager that refuses to invent a name for an unnamed operator."""

    def get(self, name, hint):
        if name is None:
            raise ValueError(
                "operator of type '%s' has no explicit name; every layer must be named" % hint)
        return name


def conv(data, name, channels, kernel=1, stride=1, pad=None, groups=1, bias=False, dilate=1,
         weight_init=None):
    """2-D convolution named ``name``; ``pad`` defaults to 'same' for odd kernels.

    ``weight_init`` (an ``mx.init`` initializer) overrides the model-wide initializer
    for this layer's weight, e.g. the small normal of prediction layers.
    """
    kernel = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
    stride = (stride, stride) if isinstance(stride, int) else tuple(stride)
    if pad is None:
        pad = tuple(dilate * (k // 2) for k in kernel)
    elif isinstance(pad, int):
        pad = (pad, pad)
    extra = {"weight": weight_variable(name, weight_init)} if weight_init else {}
    return mx.sym.Convolution(data=data, name=name, num_filter=channels, kernel=kernel,
                              stride=stride, pad=tuple(pad), num_group=groups,
                              dilate=(dilate, dilate), no_bias=not bias, **extra)


def weight_variable(layer, init):
    """The weight of ``layer`` carrying its own initializer."""
    return mx.sym.Variable(layer + "_weight", init=init)


def dense(data, name, units, weight_init=None):
    """Fully connected layer with bias; ``weight_init`` as for :func:`conv`."""
    extra = {"weight": weight_variable(name, weight_init)} if weight_init else {}
    return mx.sym.FullyConnected(data=data, name=name, num_hidden=units, **extra)


def batchnorm(data, name, eps=BN_EPS):
    """Batch normalisation with a learnable scale (MXNet's default fixes gamma to 1)."""
    return mx.sym.BatchNorm(data=data, name=name, fix_gamma=False, eps=eps, momentum=BN_MOMENTUM)


class BatchNormLayer:
    """One BatchNorm operator of a graph: its ``name``, its parameters (``gamma``, ``beta``)
    and running statistics (``moving_mean``, ``moving_var``) by name, and its ``axis``,
    ``eps``, ``momentum``, ``fix_gamma`` and ``use_global_stats`` (MXNet's defaults where
    the graph leaves them out)."""

    def __init__(self, node, nodes):
        attrs = node.get("attrs", {})
        self.name = node["name"]
        self.gamma, self.beta, self.moving_mean, self.moving_var = (
            nodes[entry[0]]["name"] for entry in node["inputs"][1:5])
        self.axis = int(attrs.get("axis", 1))
        self.eps = float(attrs.get("eps", 1e-3))
        self.momentum = float(attrs.get("momentum", 0.9))
        self.fix_gamma = attrs.get("fix_gamma", "True") == "True"
        self.use_global_stats = attrs.get("use_global_stats", "False") == "True"

    def input_of(self, symbol):
        """The symbol of what this layer normalises, in ``symbol`` (the graph it is of)."""
        return symbol.get_internals()[self.name + "_output"].get_children()[0]


def batchnorm_layers(symbol):
    """The :class:`BatchNormLayer` of every BatchNorm operator of ``symbol``, in graph order."""
    nodes = json.loads(symbol.tojson())["nodes"]
    return [BatchNormLayer(node, nodes) for node in nodes if node["op"] == "BatchNorm"]


def global_stats_batchnorm(symbol, names):
    """``symbol`` with the BatchNorm operators ``names`` normalising by their running
    statistics in training too (``use_global_stats``), which then never change: frozen
    batch norms, as GluonCV's and Detectron2's FrozenBN (whose scale and shift the trainer
    keeps fixed)."""
    names = set(names)
    graph = json.loads(symbol.tojson())
    for node in graph["nodes"]:
        if node["op"] == "BatchNorm" and node["name"] in names:
            node.setdefault("attrs", {})["use_global_stats"] = "True"
    return mx.sym.load_json(json.dumps(graph))


def relu(data, name):
    return mx.sym.Activation(data=data, name=name, act_type="relu")


def relu6(data, name):
    return mx.sym.clip(data=data, name=name, a_min=0.0, a_max=6.0)


def conv_bn(data, name, channels, kernel=1, stride=1, pad=None, groups=1, act="relu",
            eps=BN_EPS):
    """Convolution, batch norm and an optional activation: ``name``, ``name_bn``, ``name_relu``."""
    out = conv(data, name, channels, kernel, stride, pad, groups)
    out = batchnorm(out, name + "_bn", eps)
    if act == "relu":
        out = relu(out, name + "_relu")
    elif act == "relu6":
        out = relu6(out, name + "_relu6")
    elif act is not None:
        raise ValueError("unknown activation %r" % act)
    return out


def add(lhs, rhs, name):
    return mx.sym.elemwise_add(lhs, rhs, name=name)


def pool(data, name, kind="max", kernel=3, stride=2, pad=0, global_pool=False):
    return mx.sym.Pooling(data=data, name=name, pool_type=kind, kernel=(kernel, kernel),
                          stride=(stride, stride), pad=(pad, pad), global_pool=global_pool,
                          pooling_convention="valid")


def classifier_head(data, name, num_classes):
    """Global average pooling, flatten and a fully connected layer with bias."""
    out = pool(data, name + "_pool", kind="avg", kernel=1, stride=1, global_pool=True)
    out = mx.sym.Flatten(data=out, name=name + "_flatten")
    return mx.sym.FullyConnected(data=out, name=name, num_hidden=num_classes)


def scalar(op, x, value, name):
    """MXNet's scalar operator ``op`` (e.g. ``"_plus_scalar"``) of ``x`` and ``value``."""
    return getattr(mx.sym._internal, op)(x, scalar=float(value), name=name)


def constant(values, name):
    """A ``(len(values),)`` float32 constant built from ``full`` operators (no parameter)."""
    parts = [mx.sym.full(shape=(1, 1), val=float(v), name="%s_%d" % (name, i))
             for i, v in enumerate(values)]
    # Joined along axis 1: MXNet's quantization pass logs two lines for every concat along
    # axis 0 (which it cannot quantize), even of constants it leaves in fp32 anyway.
    row = parts[0] if len(parts) == 1 else mx.sym.concat(*parts, dim=1, name=name + "_row")
    return mx.sym.Reshape(row, shape=(-1,), name=name)


def gather_rows(rows, index, name):
    """``rows`` ``(B, N, K)`` at ``index`` ``(B, M)`` (float row numbers): ``(B, M, K)``."""
    batch = mx.sym.broadcast_like(mx.sym.Reshape(
        mx.sym.contrib.arange_like(rows, axis=0, name=name + "_batch_range"), shape=(-1, 1),
        name=name + "_batch_col"), index, name=name + "_batch")
    return mx.sym.gather_nd(rows, mx.sym.stack(batch, index, axis=0, name=name + "_coords"),
                            name=name)


def concat(parts, axis, name):
    return parts[0] if len(parts) == 1 else mx.sym.concat(*parts, dim=axis, name=name)


def scale_gradient(x, scale, ndim, name):
    """``x`` (of ``ndim`` axes) unchanged, its gradient multiplied by ``scale`` ``(1,)``, a
    value computed in the graph (a loss's normaliser, which ``grad_scale`` cannot be).

    ``BlockGrad(x) + (x - BlockGrad(x)) * scale`` is ``x`` bit for bit (``x - x`` is exactly
    0) and only its second term carries a gradient. So a loss operator keeps its output (the
    metrics read it) while its normalisation is set here.
    """
    held = mx.sym.BlockGrad(x, name=name + "_held")
    moving = mx.sym.elemwise_sub(x, held, name=name + "_moving")
    factor = mx.sym.Reshape(mx.sym.BlockGrad(scale, name=name + "_factor"), shape=(1,) * ndim,
                            name=name + "_scale")
    return mx.sym.elemwise_add(held, mx.sym.broadcast_mul(moving, factor, name=name + "_scaled"),
                               name=name)


def one_over_count(mask, name):
    """``1 / max(sum(mask), 1)`` ``(1,)``: a loss normaliser, never a division by zero."""
    count = mx.sym.sum(mask, name=name + "_count")
    return mx.sym.reciprocal(scalar("_maximum_scalar", count, 1, name + "_count_min1"),
                             name=name)


def smooth_l1_loss(pred, target, weight, name, sigma, grad_scale):
    diff = mx.sym.elemwise_sub(pred, target, name=name + "_diff")
    diff = mx.sym.elemwise_mul(diff, weight, name=name + "_diff_weighted")
    return mx.sym.MakeLoss(mx.sym.smooth_l1(diff, scalar=sigma, name=name + "_smooth_l1"),
                           name=name + "_loss", grad_scale=grad_scale)


def nms(rows, name, overlap, valid, topk=-1, with_class=True, force_suppress=False):
    """MXNet's ``box_nms`` on corner boxes, the one NMS of every graph: sorted by score, rows
    scoring below ``valid`` dropped, the ``topk`` best (-1: all) suppressed at IoU >
    ``overlap``; kept rows first, empty ones -1. ``with_class``: rows ``[class, score, x1, y1,
    x2, y2]``, a box suppressing only its own class unless ``force_suppress``; else
    class-agnostic rows ``[score, x1, y1, x2, y2]`` (proposals)."""
    layout = (dict(coord_start=2, score_index=1, id_index=0) if with_class
              else dict(coord_start=1, score_index=0, id_index=-1))
    return mx.sym.contrib.box_nms(rows, name=name, overlap_thresh=overlap, valid_thresh=valid,
                                  topk=topk, force_suppress=force_suppress or not with_class,
                                  in_format="corner", out_format="corner", **layout)
