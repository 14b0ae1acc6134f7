"""SSD: multi-scale features, anchors, heads, and the training and inference graphs.

One code path serves every backbone. The builders take explicit arguments, grouped
in the frozen records below; :class:`zoo.architectures.ssd.SSD` fills them from a
resolved config (backbone layers already resolved to layer names).
"""
from dataclasses import dataclass

import mxnet as mx

from symbols.layers import (BN_MOMENTUM, StrictNameManager, conv, conv_bn, nms, one_over_count,
                            relu, scalar, scale_gradient)

__all__ = ["AnchorBoxes", "DETECTION_OUTPUT", "DETECTION_THRESHOLD", "Decoding", "EXTRA_STYLES",
           "FeatureMaps", "Matching", "POST_PROCESSING", "TRAINING_OUTPUTS", "anchors",
           "inference_symbol", "losses", "multi_scale_features", "num_anchors", "predictions",
           "training_symbol"]

TRAINING_OUTPUTS = ("cls_prob", "loc_loss", "cls_label")
"""The training graph's outputs by operator name: class probabilities (their gradient is
the cross-entropy's), the masked smooth-L1 box loss (both per positive anchor, see
:func:`losses`) and the class targets (-1 ignored, 0
background)."""
DETECTION_OUTPUT = "det_out"
"""The extra output of a training graph built ``with_detections``: the batch's detections,
for a metric that needs them. Decoding and NMS over every anchor cost a share of each step,
so training builds it only on request."""


@dataclass(frozen=True)
class FeatureMaps:
    """The maps the heads see, one entry per map: a backbone ``layers`` name (reduced to
    ``filters`` channels unless -1) or ``''`` for an extra block of that width, stride and
    padding; the map's ``channels`` and its initial L2-norm scale (-1: none). ``extra_style``:
    how an extra block is built (see :func:`multi_scale_features`)."""
    layers: tuple
    filters: tuple
    strides: tuple
    pads: tuple
    use_bn: bool
    normalizations: tuple
    channels: tuple
    extra_style: str = "zoo"


@dataclass(frozen=True)
class AnchorBoxes:
    """Per map: anchor ``sizes`` and aspect ``ratios``, and the anchor ``steps`` as fractions
    of the image side (-1: the map's own cell size)."""
    sizes: tuple
    ratios: tuple
    steps: tuple


POST_PROCESSING = ("multibox", "per_class")
"""``multibox``: MXNet's ``MultiBoxDetection`` (each anchor's best class only, boxes clipped to
the image before NMS); ``per_class``: GluonCV's SSD (every class of every anchor, boxes
unclipped, NMS per class)."""

EXTRA_STYLES = ("zoo", "gluoncv")
"""``zoo``: an extra block is a 1x1 convolution at half its width then the strided 3x3, each
with learned-scale batch norm; ``gluoncv``: GluonCV's ``FeatureExpander``, the 1x1 at the
block's full width and batch norm with its scale fixed at 1 and eps 1e-3."""

DETECTION_THRESHOLD = 0.01
"""The default of :attr:`Decoding.score_threshold` (MultiBoxDetection's and GluonCV's)."""


@dataclass(frozen=True)
class Decoding:
    """How predictions become detections: ``method`` one of :data:`POST_PROCESSING`;
    ``score_threshold`` the class probability a candidate must exceed to reach NMS."""
    variances: tuple
    nms_threshold: float
    nms_topk: int
    force_suppress: bool
    score_threshold: float
    method: str = "multibox"


@dataclass(frozen=True)
class Matching:
    """How ``MultiBoxTarget`` assigns anchors to ground truth and mines hard negatives, and
    the weight of the box term against the class term (GluonCV's ``SSDMultiBoxLoss``
    ``lambd``)."""
    overlap_threshold: float
    negative_mining_ratio: float
    negative_mining_thresh: float
    box_loss_weight: float = 1.0


def multi_scale_features(body, from_layers, num_filters, strides, pads, use_bn=True,
                         extra_style="zoo"):
    """Feature maps for the heads: backbone layers where ``from_layers`` names one,
    and extra stride-``s`` blocks (1x1 reduce, 3x3 conv) where it is empty, built in
    ``extra_style`` (one of :data:`EXTRA_STYLES`)."""
    internals = body.get_internals()
    gluoncv = extra_style == "gluoncv"
    features = []
    for i, (layer, filters, stride, pad) in enumerate(zip(from_layers, num_filters, strides, pads)):
        if layer:
            feature = internals[layer + "_output"]
            if filters > 0:
                feature = _conv_act(feature, "feat%d_reduce" % i, filters, 1, 1, 0, use_bn)
        else:
            reduced = filters if gluoncv else filters // 2
            feature = _conv_act(features[-1], "extra%d_conv1" % i, reduced, 1, 1, 0, use_bn,
                                gluoncv)
            feature = _conv_act(feature, "extra%d_conv2" % i, filters, 3, stride, pad, use_bn,
                                gluoncv)
        features.append(feature)
    return features


def _conv_act(data, name, channels, kernel, stride, pad, use_bn, fixed_scale=False):
    """Convolution, batch norm (``fixed_scale``: MXNet's symbol default, GluonCV's extras:
    gamma fixed at 1, eps 1e-3) and ReLU; without batch norm a biased convolution."""
    if not use_bn:
        return relu(conv(data, name, channels, kernel, stride, pad, bias=True), name + "_relu")
    if not fixed_scale:
        return conv_bn(data, name, channels, kernel, stride, pad)
    out = conv(data, name, channels, kernel, stride, pad)
    out = mx.sym.BatchNorm(data=out, name=name + "_bn", fix_gamma=True, eps=1e-3,
                           momentum=BN_MOMENTUM)
    return relu(out, name + "_relu")


def l2_normalize(features, normalizations, channels):
    """Scale-learned L2 normalisation (as on VGG's conv4_3) where the entry is > 0."""
    out = []
    for i, (feature, scale, width) in enumerate(zip(features, normalizations, channels)):
        if scale > 0:
            feature = mx.sym.L2Normalization(feature, mode="channel", name="feat%d_l2norm" % i)
            gamma = mx.sym.Variable("feat%d_scale" % i, shape=(1, width, 1, 1),
                                    init=mx.init.Constant(scale))
            feature = mx.sym.broadcast_mul(gamma, feature, name="feat%d_scaled" % i)
        out.append(feature)
    return out


def num_anchors(sizes, ratios):
    """Anchors per location of ``MultiBoxPrior``: every size at ratio 1, every other ratio."""
    return len(sizes) + len(ratios) - 1


def anchors(features, sizes, ratios, steps):
    """``(1, N, 4)`` anchors, corner format normalised to [0, 1]; ``steps`` in [0, 1] or -1."""
    per_layer = []
    for i, (feature, size, ratio, step) in enumerate(zip(features, sizes, ratios, steps)):
        prior = mx.sym.contrib.MultiBoxPrior(feature, sizes=tuple(size), ratios=tuple(ratio),
                                             clip=False, steps=(step, step), offsets=(0.5, 0.5),
                                             name="head%d_anchors" % i)
        per_layer.append(mx.sym.Flatten(prior, name="head%d_anchors_flat" % i))
    flat = mx.sym.concat(*per_layer, dim=1, name="anchors_concat")
    return mx.sym.Reshape(flat, shape=(0, -1, 4), name="anchors")


def _head(features, name, outputs_per_anchor, counts):
    """3x3 convolution per feature map, flattened to (B, sum(H*W*A*outputs)) in anchor order.

    The weights start from a small normal: Xavier's larger start gives class logits
    in the tens and an initial loss near 20, which costs the first epochs.
    """
    flat = []
    for i, (feature, count) in enumerate(zip(features, counts)):
        pred = conv(feature, "head%d_%s" % (i, name), count * outputs_per_anchor, kernel=3,
                    bias=True, weight_init=mx.init.Normal(0.01))
        pred = mx.sym.transpose(pred, axes=(0, 2, 3, 1), name="head%d_%s_nhwc" % (i, name))
        flat.append(mx.sym.Flatten(pred, name="head%d_%s_flat" % (i, name)))
    return mx.sym.concat(*flat, dim=1, name="%s_concat" % name)


def class_predictions(features, num_classes, counts):
    """``(B, num_classes + 1, N)`` class scores (background is class 0)."""
    flat = _head(features, "cls", num_classes + 1, counts)
    scores = mx.sym.Reshape(flat, shape=(0, -1, num_classes + 1), name="cls_preds_nac")
    return mx.sym.transpose(scores, axes=(0, 2, 1), name="cls_preds")


def box_predictions(features, counts):
    """``(B, N * 4)`` box offsets relative to the anchors."""
    return _head(features, "loc", 4, counts)


def predictions(backbone, features, anchor_boxes, num_classes):
    """Class scores, box offsets and anchors: ``features`` a :class:`FeatureMaps`,
    ``anchor_boxes`` an :class:`AnchorBoxes`."""
    body = backbone.body()
    maps = multi_scale_features(body, features.layers, features.filters, features.strides,
                                features.pads, features.use_bn, features.extra_style)
    maps = l2_normalize(maps, features.normalizations, features.channels)
    counts = [num_anchors(s, r) for s, r in zip(anchor_boxes.sizes, anchor_boxes.ratios)]
    return (class_predictions(maps, num_classes, counts),
            box_predictions(maps, counts),
            anchors(maps, anchor_boxes.sizes, anchor_boxes.ratios, anchor_boxes.steps))


def _detections(cls_preds, loc_preds, prior, decoding, name):
    cls_prob = mx.sym.softmax(cls_preds, axis=1, name=name + "_cls_prob")
    if decoding.method == "per_class":
        return _per_class_detections(cls_prob, loc_preds, prior, decoding, name)
    return mx.sym.contrib.MultiBoxDetection(
        cls_prob, loc_preds, prior, name=name, clip=True, threshold=decoding.score_threshold,
        nms_threshold=decoding.nms_threshold, force_suppress=decoding.force_suppress,
        variances=tuple(decoding.variances), nms_topk=decoding.nms_topk)


def _per_class_detections(cls_prob, loc_preds, prior, decoding, name):
    """GluonCV's SSD post-processing of ``cls_prob`` ``(B, C + 1, N)``: a candidate row
    ``[class, score, x1, y1, x2, y2]`` per foreground class and anchor, class-major (GluonCV's
    order, which decides ties), boxes decoded without clipping; NMS per class over the
    ``nms_topk`` best scoring over ``score_threshold`` (the others are never
    valid). Returns the ``(B, nms_topk, 6)`` rows NMS sorts first (all rows for -1), empty
    ones -1. Built of ``box_decode`` and ``box_nms`` and tensor operators only, so that it
    converts to ONNX like the rest of the graph."""
    scores = mx.sym.slice_axis(cls_prob, axis=1, begin=1, end=None, name=name + "_scores")
    classes = mx.sym.Reshape(mx.sym.contrib.arange_like(scores, axis=1, name=name + "_range"),
                             shape=(1, -1, 1), name=name + "_range_col")
    classes = mx.sym.broadcast_like(classes, scores, name=name + "_classes")
    deltas = mx.sym.Reshape(loc_preds, shape=(0, -1, 4), name=name + "_deltas")
    std_x, std_y, std_w, std_h = decoding.variances
    boxes = mx.sym.contrib.box_decode(deltas, prior, std_x, std_y, std_w, std_h, clip=-1,
                                      format="corner", name=name + "_boxes")
    # (B, 1, N, 4) + zeros (B, C, N, 1): a copy of the boxes per class, exactly
    boxes = mx.sym.broadcast_add(
        mx.sym.Reshape(boxes, shape=(0, 1, -1, 4), name=name + "_boxes_once"),
        mx.sym.zeros_like(mx.sym.Reshape(scores, shape=(0, 0, -1, 1), name=name + "_scores_col"),
                          name=name + "_per_class_zeros"), name=name + "_boxes_per_class")
    rows = mx.sym.concat(
        mx.sym.Reshape(classes, shape=(0, -1, 1), name=name + "_class_rows"),
        mx.sym.Reshape(scores, shape=(0, -1, 1), name=name + "_score_rows"),
        mx.sym.Reshape(boxes, shape=(0, -1, 4), name=name + "_box_rows"),
        dim=2, name=name + "_candidates")
    kept = nms(rows, name + "_nms", decoding.nms_threshold, decoding.score_threshold,
               decoding.nms_topk, force_suppress=decoding.force_suppress)
    return mx.sym.slice_axis(kept, axis=1, begin=0,
                             end=None if decoding.nms_topk < 0 else decoding.nms_topk, name=name)


def inference_symbol(backbone, features, anchor_boxes, num_classes, decoding):
    """Detections ``(B, N, 6)``: class id (-1 for none), score, x1, y1, x2, y2 in [0, 1]."""
    with StrictNameManager():
        cls_preds, loc_preds, prior = predictions(backbone, features, anchor_boxes, num_classes)
        return _detections(cls_preds, loc_preds, prior, decoding, "detection")


def losses(cls_preds, loc_preds, loc_target, loc_mask, cls_target, box_weight=1.0):
    """``(cls_prob, loc_loss, cls_label)``: softmax cross-entropy over the anchors that count
    (positives and mined negatives; -1 is ignored) and smooth L1 over the positives' box
    offsets, each summed and divided by the batch's positive anchors, as the SSD paper and
    GluonCV's ``SSDMultiBoxLoss`` do, so that an lr from either means the same here. (MXNet's
    ``normalization="valid"``, used before, divided the class term by positives and negatives,
    4x the positives at 3:1 mining, and the box term per coordinate: 0.25x the gradient.)
    ``box_weight`` multiplies the box term's gradient (1: the graph has no such operator)."""
    per_positive = one_over_count(scalar("_greater_scalar", cls_target, 0, "positive_anchors"),
                                  "per_positive")
    # SoftmaxOutput divides by the anchors that count ("valid"; its "null" divides by all the
    # anchors of an image): scaled back by them, then divided by the positives.
    counted = mx.sym.sum(scalar("_greater_equal_scalar", cls_target, 0, "counted_anchors"),
                         name="num_counted")
    cls_scale = mx.sym.elemwise_mul(counted, per_positive, name="cls_per_positive")
    cls_prob = mx.sym.SoftmaxOutput(scale_gradient(cls_preds, cls_scale, 3, "cls_preds_scaled"),
                                    cls_target, name="cls_prob", ignore_label=-1,
                                    use_ignore=True, multi_output=True, normalization="valid")
    loc_scale = per_positive if box_weight == 1 else scalar(
        "_mul_scalar", per_positive, box_weight, "per_positive_box_weighted")
    loc_diff = mx.sym.elemwise_sub(scale_gradient(loc_preds, loc_scale, 2, "loc_preds_scaled"),
                                   loc_target, name="loc_diff")
    loc_diff = mx.sym.elemwise_mul(loc_diff, loc_mask, name="loc_diff_masked")
    loc_smooth = mx.sym.smooth_l1(loc_diff, scalar=1.0, name="loc_smooth_l1")
    loc_loss = mx.sym.MakeLoss(loc_smooth, name="loc_loss", normalization="null")
    cls_label = mx.sym.MakeLoss(cls_target, name="cls_label", grad_scale=0)
    return cls_prob, loc_loss, cls_label


def training_symbol(backbone, features, anchor_boxes, num_classes, decoding, matching,
                    with_detections=False):
    """Training graph on ``data`` and ``label`` ``(B, M, 5+)`` rows ``[cls, x1, y1, x2, y2, ...]``
    padded with -1: softmax cross-entropy with hard negative mining and smooth L1.

    Outputs, named as :data:`TRAINING_OUTPUTS` lists them: class probabilities (loss), box
    loss and class targets; ``with_detections`` adds :data:`DETECTION_OUTPUT`, detections
    without gradient (losses and gradients are the same either way).
    """
    with StrictNameManager():
        cls_preds, loc_preds, prior = predictions(backbone, features, anchor_boxes, num_classes)
        label = mx.sym.Variable("label")
        target = mx.sym.contrib.MultiBoxTarget(
            prior, label, cls_preds, name="multibox_target",
            overlap_threshold=matching.overlap_threshold, ignore_label=-1,
            negative_mining_ratio=matching.negative_mining_ratio, minimum_negative_samples=0,
            negative_mining_thresh=matching.negative_mining_thresh,
            variances=tuple(decoding.variances))
        cls_prob, loc_loss, cls_label = losses(cls_preds, loc_preds, target[0], target[1],
                                               target[2], matching.box_loss_weight)
        if not with_detections:
            return mx.sym.Group([cls_prob, loc_loss, cls_label])
        detections = _detections(mx.sym.BlockGrad(cls_preds, name="cls_preds_nograd"),
                                 mx.sym.BlockGrad(loc_preds, name="loc_preds_nograd"),
                                 mx.sym.BlockGrad(prior, name="anchors_nograd"), decoding,
                                 "train_detection")
        det_out = mx.sym.MakeLoss(detections, name=DETECTION_OUTPUT, grad_scale=0)
        return mx.sym.Group([cls_prob, loc_loss, cls_label, det_out])
