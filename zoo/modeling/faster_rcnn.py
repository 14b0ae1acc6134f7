"""Faster R-CNN: RPN on one backbone feature, ROIAlign, a box head built from the
backbone's next stage (the C4 design), and the training and inference graphs.

One code path for every backbone. The builders take explicit arguments, grouped in
the frozen records below; :class:`zoo.detectors.faster_rcnn.FasterRCNN` fills them
from a resolved config (the RPN feature already resolved to a layer name).
Inputs are ``data`` ``(B, 3, H, W)`` and ``im_info`` ``(B, 3)`` rows ``[height,
width, scale]`` of the valid image inside ``data``; training adds ``label``
``(B, M, 6)`` as for SSD.

Proposals (:func:`proposals`) are built from composable MXNet operators only, so the
graph exports: anchors computed in the graph from the feature map's shape, per-image top-k
of the object scores, decoding, clipping, minimum size and ``box_nms``. They use the
continuous box convention of GluonCV and Detectron2 (:mod:`zoo.modeling.box_coder`): a box
``[x1, y1, x2, y2]`` is ``x2 - x1`` wide (no "+1"), centred at ``x1 + 0.5 * width``, deltas
``dw``/``dh`` clipped at ``log(1000 / 16)`` when decoded, boxes clipped to ``[0, width] x
[0, height]`` of ``im_info``, IoU without "+1". The training targets
(:mod:`zoo.modeling.rcnn_targets`) encode and match with the same anchors and convention.
"""
import json
from dataclasses import dataclass

import mxnet as mx

from . import box_coder
from . import rcnn_targets  # noqa: F401  (registers the custom target operators)
from .layers import StrictNameManager, conv, dense, pool, relu

RPN_CHANNELS = 512
TRAINING_OUTPUTS = ("rpn_cls_loss", "rpn_bbox_loss", "rcnn_cls_loss", "rcnn_bbox_loss",
                    "rpn_label_out", "rcnn_label_out")
"""The training graph's outputs by operator name: RPN class probabilities (loss), RPN box
loss, R-CNN class probabilities (loss), R-CNN box loss, and the RPN and R-CNN labels the
losses were computed against (for metrics)."""


@dataclass(frozen=True)
class RPN:
    """The region proposal network on backbone ``layer`` (stride ``stride``): anchors of
    ``scales`` x ``ratios`` and the proposal settings of the graph being built (training
    or test top-n), as :func:`proposals` applies them."""
    layer: str
    stride: int
    scales: tuple
    ratios: tuple
    pre_nms_top_n: int
    post_nms_top_n: int
    nms_threshold: float
    min_size: int

    @property
    def num_anchors(self):
        return num_rpn_anchors(self.scales, self.ratios)


@dataclass(frozen=True)
class BoxHead:
    """ROIAlign to ``roi_size``, backbone ``stage`` as the head, ``num_classes`` + background
    scores and per-class deltas normalised by ``box_stds``."""
    stage: str
    roi_size: tuple
    num_classes: int
    box_stds: tuple


@dataclass(frozen=True)
class Decoding:
    """Per-class NMS and the detections kept per image."""
    nms_threshold: float
    score_threshold: float
    max_detections: int


@dataclass(frozen=True)
class Sampling:
    """Training targets: anchors per image for the RPN and ROIs per image for the head, their
    foreground fractions and IoU thresholds; ``batch_images`` scales the box losses."""
    rpn_batch_size: int
    rpn_fg_fraction: float
    rpn_positive_iou: float
    rpn_negative_iou: float
    rcnn_batch_rois: int
    rcnn_fg_fraction: float
    rcnn_fg_iou: float
    batch_images: int


def num_rpn_anchors(scales, ratios):
    return len(scales) * len(ratios)


def rpn(feature, count):
    """RPN head: a shared 3x3 conv, then objectness ``(B, 2A, H, W)`` and deltas
    ``(B, 4A, H, W)``; prediction layers start from a small normal, as in the paper."""
    small = mx.init.Normal(0.01)
    hidden = relu(conv(feature, "rpn_conv_3x3", RPN_CHANNELS, kernel=3, bias=True,
                       weight_init=small), "rpn_conv_3x3_relu")
    return (conv(hidden, "rpn_cls_score", 2 * count, kernel=1, bias=True, weight_init=small),
            conv(hidden, "rpn_bbox_pred", 4 * count, kernel=1, bias=True, weight_init=small))


def rpn_scores_by_class(score):
    """``(B, 2, A*H, W)``: background and object scores as the softmax's class axis."""
    return mx.sym.Reshape(score, shape=(0, 2, -1, 0), name="rpn_cls_score_reshape")


def rpn_probabilities(score, count):
    prob = mx.sym.softmax(rpn_scores_by_class(score), axis=1, name="rpn_cls_prob")
    return mx.sym.Reshape(prob, shape=(0, 2 * count, -1, 0), name="rpn_cls_prob_reshape")


def _scalar(op, x, value, name):
    return getattr(mx.sym._internal, op)(x, scalar=float(value), name=name)


def _constant(values, name):
    """A ``(len(values),)`` float32 constant built from ``full`` operators (no parameter)."""
    parts = [mx.sym.full(shape=(1,), val=float(v), name="%s_%d" % (name, i))
             for i, v in enumerate(values)]
    return parts[0] if len(parts) == 1 else mx.sym.concat(*parts, dim=0, name=name)


def anchor_grid(feature, rpn_spec):
    """``(A * H * W, 4)`` anchors of :func:`zoo.modeling.box_coder.grid_anchors` for the
    feature map's own ``H x W``, computed in the graph so that they follow the bound shape."""
    base = box_coder.base_anchors(rpn_spec.stride, rpn_spec.scales, rpn_spec.ratios)
    count = len(base)
    template = mx.sym.BlockGrad(feature, name="rpn_anchor_template")
    cols = mx.sym.contrib.arange_like(template, axis=3, name="rpn_anchor_cols")
    rows = mx.sym.contrib.arange_like(template, axis=2, name="rpn_anchor_rows")
    cols = mx.sym.Reshape(_scalar("_mul_scalar", cols, rpn_spec.stride, "rpn_anchor_cols_px"),
                          shape=(1, 1, 1, -1), name="rpn_anchor_shift_x")
    rows = mx.sym.Reshape(_scalar("_mul_scalar", rows, rpn_spec.stride, "rpn_anchor_rows_px"),
                          shape=(1, 1, -1, 1), name="rpn_anchor_shift_y")
    shift_x = mx.sym.broadcast_add(cols, mx.sym.zeros_like(rows, name="rpn_anchor_zero_y"),
                                   name="rpn_anchor_grid_x")  # (1, 1, H, W)
    shift_y = mx.sym.broadcast_add(rows, mx.sym.zeros_like(cols, name="rpn_anchor_zero_x"),
                                   name="rpn_anchor_grid_y")
    corners = []
    for k, shift in enumerate([shift_x, shift_y, shift_x, shift_y]):
        offset = mx.sym.Reshape(_constant(base[:, k], "rpn_base_anchor_%d" % k),
                                shape=(1, count, 1, 1), name="rpn_base_anchor_%d_map" % k)
        corners.append(mx.sym.expand_dims(mx.sym.broadcast_add(
            offset, shift, name="rpn_anchor_%d" % k), axis=4, name="rpn_anchor_%d_col" % k))
    grid = mx.sym.concat(*corners, dim=4, name="rpn_anchor_corners")  # (1, A, H, W, 4)
    return mx.sym.Reshape(grid, shape=(-1, 4), name="rpn_anchors")


def _decode(anchors, deltas):
    """Continuous decoding of ``deltas`` ``(B, N, 4)`` on ``anchors`` ``(B, N, 4)``, as
    :func:`zoo.modeling.box_coder.decode`."""
    def part(x, k, name):
        return mx.sym.slice_axis(x, axis=2, begin=k, end=k + 1, name=name)

    ax1, ay1, ax2, ay2 = (part(anchors, k, "rpn_anchor_c%d" % k) for k in range(4))
    dx, dy, dw, dh = (part(deltas, k, "rpn_delta_%d" % k) for k in range(4))
    aw = mx.sym.elemwise_sub(ax2, ax1, name="rpn_anchor_w")
    ah = mx.sym.elemwise_sub(ay2, ay1, name="rpn_anchor_h")
    out = []
    for tag, low, size, d, ds in (("x", ax1, aw, dx, dw), ("y", ay1, ah, dy, dh)):
        half = _scalar("_mul_scalar", size, 0.5, "rpn_anchor_half_" + tag)
        centre = mx.sym.elemwise_add(low, half, name="rpn_anchor_c" + tag)
        centre = mx.sym.elemwise_add(centre, mx.sym.elemwise_mul(d, size, name="rpn_shift_" + tag),
                                     name="rpn_pred_c" + tag)
        grow = mx.sym.exp(_scalar("_minimum_scalar", ds, box_coder.DELTA_CLIP,
                                  "rpn_clip_d" + tag), name="rpn_grow_" + tag)
        half = mx.sym.elemwise_mul(half, grow, name="rpn_pred_half_" + tag)
        out.append((mx.sym.elemwise_sub(centre, half, name="rpn_pred_%s1" % tag),
                    mx.sym.elemwise_add(centre, half, name="rpn_pred_%s2" % tag)))
    (x1, x2), (y1, y2) = out
    return mx.sym.concat(x1, y1, x2, y2, dim=2, name="rpn_decoded")


def proposals(prob, deltas, feature, im_info, rpn_spec):
    """``(B * post_nms, 5)`` proposals ``[batch index, x1, y1, x2, y2]`` in pixels, sorted by
    score within each image, from RPN probabilities ``(B, 2A, H, W)`` and deltas
    ``(B, 4A, H, W)`` on ``feature``; ``rpn_spec`` an :class:`RPN`.

    Per image: the ``pre_nms_top_n`` best anchors by object score; continuous decoding
    (:mod:`zoo.modeling.box_coder`); clipping to ``[0, width] x [0, height]`` of ``im_info``;
    boxes narrower or shorter than ``min_size * scale`` get score -1 and are dropped; NMS
    (``box_nms``, continuous IoU, ``nms_threshold``); the ``post_nms_top_n`` best. An image
    with fewer survivors repeats its best proposal to fill its rows, one without any (an
    untrained RPN can throw every box off the image) gets its whole valid area.
    """
    count = rpn_spec.num_anchors
    pre, post = rpn_spec.pre_nms_top_n, rpn_spec.post_nms_top_n
    scores = mx.sym.slice_axis(prob, axis=1, begin=count, end=None, name="rpn_object_prob")
    scores = mx.sym.Reshape(scores, shape=(0, -1), name="rpn_object_scores")  # (B, A*H*W)
    deltas = mx.sym.Reshape(deltas, shape=(0, count, 4, -1), name="rpn_deltas_by_anchor")
    deltas = mx.sym.transpose(deltas, axes=(0, 1, 3, 2), name="rpn_deltas_last")
    deltas = mx.sym.Reshape(deltas, shape=(0, -1, 4), name="rpn_deltas_flat")  # (B, A*H*W, 4)
    anchors = anchor_grid(feature, rpn_spec)
    # pre_nms_top_n empty candidates (score -1, the last anchor) after the real ones, so
    # that top-k never asks a small feature map for more anchors than it has.
    pad_score = mx.sym.broadcast_like(mx.sym.full(shape=(1, pre), val=-1.0, name="rpn_pad_score"),
                                      scores, lhs_axes=(0,), rhs_axes=(0,),
                                      name="rpn_pad_scores")
    pad_delta = mx.sym.broadcast_like(mx.sym.zeros(shape=(1, pre, 4), name="rpn_pad_delta"),
                                      deltas, lhs_axes=(0,), rhs_axes=(0,),
                                      name="rpn_pad_deltas")
    scores = mx.sym.concat(scores, pad_score, dim=1, name="rpn_scores_padded")
    deltas = mx.sym.concat(deltas, pad_delta, dim=1, name="rpn_deltas_padded")
    top_scores, top_index = mx.sym.topk(scores, axis=1, k=pre, ret_typ="both",
                                        is_ascend=False, name="rpn_pre_nms_topk")
    batch = mx.sym.contrib.arange_like(scores, axis=0, name="rpn_batch_range")
    batch = mx.sym.broadcast_like(mx.sym.Reshape(batch, shape=(-1, 1), name="rpn_batch_col"),
                                  top_index, name="rpn_batch_of_top")
    top_deltas = mx.sym.gather_nd(deltas, mx.sym.stack(batch, top_index, axis=0,
                                                       name="rpn_top_coords"),
                                  name="rpn_top_deltas")  # (B, pre, 4)
    top_anchors = mx.sym.take(anchors, top_index, axis=0, mode="clip", name="rpn_top_anchors")
    boxes = _decode(top_anchors, top_deltas)
    height = mx.sym.slice_axis(im_info, axis=1, begin=0, end=1, name="rpn_image_height")
    width = mx.sym.slice_axis(im_info, axis=1, begin=1, end=2, name="rpn_image_width")
    bound = mx.sym.Reshape(mx.sym.concat(width, height, width, height, dim=1,
                                         name="rpn_image_bound"), shape=(0, 1, 4),
                           name="rpn_image_bound_rows")
    boxes = mx.sym.broadcast_minimum(mx.sym.relu(boxes, name="rpn_clip_low"), bound,
                                     name="rpn_clipped")
    min_size = mx.sym.Reshape(_scalar(
        "_mul_scalar", mx.sym.slice_axis(im_info, axis=1, begin=2, end=3, name="rpn_image_scale"),
        rpn_spec.min_size, "rpn_min_size_px"), shape=(0, 1, 1), name="rpn_min_size")
    x1, y1, x2, y2 = (mx.sym.slice_axis(boxes, axis=2, begin=k, end=k + 1,
                                        name="rpn_clipped_%d" % k) for k in range(4))
    short = mx.sym.broadcast_minimum(mx.sym.elemwise_sub(x2, x1, name="rpn_box_w"),
                           mx.sym.elemwise_sub(y2, y1, name="rpn_box_h"), name="rpn_short_side")
    big = mx.sym.broadcast_greater_equal(short, min_size, name="rpn_big_enough")
    top_scores = mx.sym.Reshape(top_scores, shape=(0, 0, 1), name="rpn_top_scores")
    # Too small: score -1 (padding candidates already have it).
    top_scores = mx.sym.where(big, top_scores, _scalar("_minus_scalar", big, 1.0,
                                                       "rpn_small_score"),
                              name="rpn_sized_scores")
    rows = mx.sym.concat(top_scores, boxes, dim=2, name="rpn_candidates")
    kept = mx.sym.contrib.box_nms(rows, name="rpn_nms", overlap_thresh=rpn_spec.nms_threshold,
                                  valid_thresh=-0.5, topk=pre, coord_start=1, score_index=0,
                                  id_index=-1, force_suppress=True, in_format="corner",
                                  out_format="corner")
    kept = mx.sym.slice_axis(kept, axis=1, begin=0, end=post, name="rpn_post_nms_topk")
    valid = _scalar("_greater_equal_scalar",
                    mx.sym.slice_axis(kept, axis=2, begin=0, end=1, name="rpn_kept_score"), 0.0,
                    "rpn_kept_valid")
    kept = mx.sym.slice_axis(kept, axis=2, begin=1, end=5, name="rpn_kept_boxes")
    # Rows NMS left empty repeat the best proposal; an image without any gets its whole
    # valid area [0, 0, width, height].
    whole = mx.sym.concat(mx.sym.zeros_like(height, name="rpn_image_x0"),
                          mx.sym.zeros_like(height, name="rpn_image_y0"), width, height, dim=1,
                          name="rpn_image_box")
    whole = mx.sym.Reshape(whole, shape=(0, 1, 4), name="rpn_image_box_row")
    best = mx.sym.slice_axis(kept, axis=1, begin=0, end=1, name="rpn_best_box")
    best_valid = mx.sym.slice_axis(valid, axis=1, begin=0, end=1, name="rpn_best_valid")
    best = mx.sym.where(mx.sym.broadcast_like(best_valid, best, name="rpn_best_valid_box"),
                        best, whole, name="rpn_best_or_image")
    best = mx.sym.broadcast_like(best, kept, name="rpn_best_boxes")
    kept = mx.sym.where(mx.sym.broadcast_like(valid, kept, name="rpn_kept_valid_boxes"), kept,
                        best, name="rpn_filled")
    index = mx.sym.broadcast_like(mx.sym.Reshape(
        mx.sym.contrib.arange_like(kept, axis=0, name="rpn_roi_batch_range"),
        shape=(-1, 1, 1), name="rpn_roi_batch_col"), valid, name="rpn_roi_batch_index")
    rois = mx.sym.concat(index, kept, dim=2, name="rpn_roi_rows")
    return mx.sym.Reshape(rois, shape=(-1, 5), name="rpn_rois")


def box_head(backbone, feature, rois, head, stride):
    """ROIAlign the proposals on the stride-``stride`` feature and run ``head.stage`` of the
    backbone on them, pooled to vectors."""
    pooled = mx.sym.contrib.ROIAlign(feature, rois, name="roi_align",
                                     pooled_size=tuple(head.roi_size),
                                     spatial_scale=1.0 / stride, sample_ratio=2)
    top = backbone.build_stage(pooled, head.stage)
    vector = pool(top, "head_pool", kind="avg", kernel=1, stride=1, global_pool=True)
    return mx.sym.Flatten(vector, name="head_flatten")


def box_predictor(vector, num_classes):
    """Class scores ``(R, C + 1)`` and per-class box deltas ``(R, 4 (C + 1))``."""
    return (dense(vector, "rcnn_cls_score", num_classes + 1, mx.init.Normal(0.01)),
            dense(vector, "rcnn_bbox_pred", 4 * (num_classes + 1), mx.init.Normal(0.001)))


def decode_detections(rois, scores, deltas, im_info, head, rois_per_image, decoding):
    """Per-class boxes, NMS within each class, the ``max_detections`` best per image:
    ``(B, min(max_detections, rois x classes), 6)`` rows ``[class, score, x1, y1, x2, y2]``
    normalised to the valid image (class -1 marks empty rows)."""
    classes = head.num_classes
    stds = head.box_stds
    prob = mx.sym.softmax(scores, axis=1, name="rcnn_cls_prob")
    prob = mx.sym.slice_axis(prob, axis=1, begin=1, end=None, name="rcnn_fg_prob")
    deltas = mx.sym.Reshape(deltas, shape=(0, -1, 4), name="rcnn_deltas")
    deltas = mx.sym.slice_axis(deltas, axis=1, begin=1, end=None, name="rcnn_fg_deltas")
    deltas = mx.sym.transpose(deltas, axes=(1, 0, 2), name="rcnn_deltas_by_class")
    boxes = mx.sym.slice_axis(rois, axis=1, begin=1, end=5, name="rcnn_roi_boxes")
    boxes = mx.sym.expand_dims(boxes, axis=0, name="rcnn_roi_boxes_batch")
    decoded = mx.sym.contrib.box_decode(deltas, boxes, name="rcnn_decode", std0=stds[0],
                                        std1=stds[1], std2=stds[2], std3=stds[3],
                                        format="corner")
    decoded = mx.sym.transpose(decoded, axes=(1, 0, 2), name="rcnn_boxes")
    batch_index = mx.sym.slice_axis(rois, axis=1, begin=0, end=1, name="rcnn_batch_index")
    size = mx.sym.take(im_info, mx.sym.Reshape(batch_index, shape=(-1,), name="rcnn_image_of_roi"),
                       name="rcnn_roi_im_info")
    height = mx.sym.slice_axis(size, axis=1, begin=0, end=1, name="rcnn_roi_height")
    width = mx.sym.slice_axis(size, axis=1, begin=1, end=2, name="rcnn_roi_width")
    extent = mx.sym.concat(width, height, width, height, dim=1, name="rcnn_roi_extent")
    extent = mx.sym.expand_dims(extent, axis=1, name="rcnn_roi_extent_per_class")
    normalised = mx.sym.clip(mx.sym.broadcast_div(decoded, extent, name="rcnn_boxes_normalised"),
                             0.0, 1.0, name="rcnn_boxes_clipped")
    ids = mx.sym.broadcast_like(
        mx.sym.Reshape(mx.sym.contrib.arange_like(prob, axis=1, name="rcnn_class_range"),
                       shape=(1, -1), name="rcnn_class_row"), prob, name="rcnn_class_ids")
    rows = mx.sym.concat(mx.sym.expand_dims(ids, axis=2, name="rcnn_ids_col"),
                         mx.sym.expand_dims(prob, axis=2, name="rcnn_score_col"),
                         normalised, dim=2, name="rcnn_rows")
    rows = mx.sym.Reshape(rows, shape=(-1, rois_per_image * classes, 6),
                          name="rcnn_rows_by_image")
    kept = mx.sym.contrib.box_nms(rows, name="rcnn_nms", overlap_thresh=decoding.nms_threshold,
                                  valid_thresh=decoding.score_threshold, topk=-1, coord_start=2,
                                  score_index=1, id_index=0, force_suppress=False)
    # Fewer candidate rows than max_detections (few ROIs, few classes) caps the output.
    candidates = rois_per_image * classes
    return mx.sym.slice_axis(kept, axis=1, begin=0,
                             end=min(decoding.max_detections, candidates), name="detection")


def _features(backbone, layer):
    body = backbone.body()
    return body.get_internals()[layer + "_output"]


def inference_symbol(backbone, rpn_spec, head, decoding):
    """``data``, ``im_info`` to detections ``(B, max_detections, 6)``; ``rpn_spec`` an
    :class:`RPN` with the test top-n, ``head`` a :class:`BoxHead`, ``decoding`` a
    :class:`Decoding`."""
    with StrictNameManager():
        im_info = mx.sym.Variable("im_info")
        feature = _features(backbone, rpn_spec.layer)
        count = rpn_spec.num_anchors
        score, deltas = rpn(feature, count)
        rois = proposals(rpn_probabilities(score, count), deltas, feature, im_info, rpn_spec)
        cls_score, bbox_pred = box_predictor(
            box_head(backbone, feature, rois, head, rpn_spec.stride), head.num_classes)
        return decode_detections(rois, cls_score, bbox_pred, im_info, head,
                                 rpn_spec.post_nms_top_n, decoding)


def training_symbol(backbone, rpn_spec, head, sampling):
    """Training graph with RPN and R-CNN losses; ``rpn_spec`` an :class:`RPN` with the
    training top-n, ``sampling`` a :class:`Sampling`. Outputs are named as
    :data:`TRAINING_OUTPUTS` lists them."""
    with StrictNameManager():
        im_info = mx.sym.Variable("im_info")
        label = mx.sym.Variable("label")
        feature = _features(backbone, rpn_spec.layer)
        count = rpn_spec.num_anchors
        score, deltas = rpn(feature, count)
        rpn_label, rpn_target, rpn_weight = _rpn_targets(score, label, im_info, rpn_spec,
                                                         sampling)
        rpn_prob = mx.sym.SoftmaxOutput(rpn_scores_by_class(score), rpn_label, name="rpn_cls_loss",
                                        multi_output=True, use_ignore=True, ignore_label=-1,
                                        normalization="valid")
        rpn_box_loss = _box_loss(deltas, rpn_target, rpn_weight, "rpn_bbox", 3.0,
                                 1.0 / (sampling.rpn_batch_size * sampling.batch_images))
        rois = proposals(
            rpn_probabilities(mx.sym.BlockGrad(score, name="rpn_cls_score_nograd"), count),
            mx.sym.BlockGrad(deltas, name="rpn_bbox_pred_nograd"), feature, im_info, rpn_spec)
        sampled = mx.sym.Custom(rois, label, im_info, name="proposal_target",
                                op_type="zoo_proposal_target", num_classes=head.num_classes,
                                batch_rois=sampling.rcnn_batch_rois,
                                fg_fraction=sampling.rcnn_fg_fraction,
                                fg_iou=sampling.rcnn_fg_iou,
                                box_stds=json.dumps(list(head.box_stds)))
        cls_score, bbox_pred = box_predictor(
            box_head(backbone, feature, sampled[0], head, rpn_spec.stride), head.num_classes)
        cls_prob = mx.sym.SoftmaxOutput(cls_score, sampled[1], name="rcnn_cls_loss",
                                        normalization="batch")
        box_loss = _box_loss(bbox_pred, sampled[2], sampled[3], "rcnn_bbox", 1.0,
                             1.0 / (sampling.rcnn_batch_rois * sampling.batch_images))
        return mx.sym.Group([rpn_prob, rpn_box_loss, cls_prob, box_loss,
                             mx.sym.BlockGrad(rpn_label, name="rpn_label_out"),
                             mx.sym.BlockGrad(sampled[1], name="rcnn_label_out")])


def _rpn_targets(score, label, im_info, rpn_spec, sampling):
    targets = mx.sym.Custom(score, label, im_info, name="rpn_target", op_type="zoo_rpn_target",
                            stride=rpn_spec.stride, scales=json.dumps(list(rpn_spec.scales)),
                            ratios=json.dumps(list(rpn_spec.ratios)),
                            batch_size=sampling.rpn_batch_size,
                            fg_fraction=sampling.rpn_fg_fraction,
                            positive_iou=sampling.rpn_positive_iou,
                            negative_iou=sampling.rpn_negative_iou)
    return targets[0], targets[1], targets[2]


def _box_loss(pred, target, weight, name, sigma, grad_scale):
    diff = mx.sym.elemwise_sub(pred, target, name=name + "_diff")
    diff = mx.sym.elemwise_mul(diff, weight, name=name + "_diff_weighted")
    return mx.sym.MakeLoss(mx.sym.smooth_l1(diff, scalar=sigma, name=name + "_smooth_l1"),
                           name=name + "_loss", grad_scale=grad_scale)
