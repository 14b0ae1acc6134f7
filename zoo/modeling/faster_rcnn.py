"""Faster R-CNN: RPN on one backbone feature, ROIAlign, a box head built from the
backbone's next stage (the C4 design), and the training and inference graphs.

One code path for every backbone. The builders take explicit arguments, grouped in
the frozen records below; :class:`zoo.detectors.faster_rcnn.FasterRCNN` fills them
from a resolved config (the RPN feature already resolved to a layer name).
Inputs are ``data`` ``(B, 3, H, W)`` and ``im_info`` ``(B, 3)`` rows ``[height,
width, scale]`` of the valid image inside ``data``; training adds ``label``
``(B, M, 6)`` as for SSD.
"""
import json
from dataclasses import dataclass

import mxnet as mx

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
    ``scales`` x ``ratios`` and ``MultiProposal``'s settings for the graph being built
    (training or test top-n)."""
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


def covered_im_info(feature, im_info, stride):
    """``im_info`` with height and width cut to what the anchor grid covers.

    ``MultiProposal`` aborts the process if the feature map is smaller than the image
    over the stride, which unpadded backbones (Inception-v3) produce; their proposals
    are clipped to the covered area instead. A no-op for padded backbones.
    """
    grid = mx.sym.slice_axis(mx.sym.shape_array(feature, name="rpn_feature_shape"), axis=0,
                             begin=2, end=4, name="rpn_grid_size")
    grid = mx.sym.cast(grid, dtype="float32", name="rpn_grid_size_float")
    extent = mx.sym._internal._mul_scalar(grid, scalar=float(stride), name="rpn_grid_pixels")
    extent = mx.sym.Reshape(extent, shape=(1, 2), name="rpn_grid_extent")
    size = mx.sym.slice_axis(im_info, axis=1, begin=0, end=2, name="rpn_image_size")
    scale = mx.sym.slice_axis(im_info, axis=1, begin=2, end=3, name="rpn_image_scale")
    covered = mx.sym.broadcast_minimum(size, extent, name="rpn_covered_size")
    return mx.sym.concat(covered, scale, dim=1, name="rpn_im_info")


def proposals(prob, deltas, im_info, rpn_spec):
    """``(B * post_nms, 5)`` proposals ``[batch index, x1, y1, x2, y2]`` in pixels; ``im_info``
    as :func:`covered_im_info` gives it; ``rpn_spec`` an :class:`RPN`."""
    return mx.sym.contrib.MultiProposal(
        prob, deltas, im_info, name="rpn_rois", feature_stride=rpn_spec.stride,
        scales=tuple(rpn_spec.scales), ratios=tuple(rpn_spec.ratios),
        rpn_pre_nms_top_n=rpn_spec.pre_nms_top_n, rpn_post_nms_top_n=rpn_spec.post_nms_top_n,
        threshold=rpn_spec.nms_threshold, rpn_min_size=rpn_spec.min_size)


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
        rpn_info = covered_im_info(feature, im_info, rpn_spec.stride)
        rois = proposals(rpn_probabilities(score, count), deltas, rpn_info, rpn_spec)
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
            mx.sym.BlockGrad(deltas, name="rpn_bbox_pred_nograd"),
            covered_im_info(feature, im_info, rpn_spec.stride), rpn_spec)
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
