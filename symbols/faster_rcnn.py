"""Faster R-CNN (C4): the RPN (:mod:`symbols.rpn`) on one backbone feature, ROIAlign, a box
head built from the backbone's next stage, and the training and inference graphs.

One code path for every backbone. The builders take explicit arguments, grouped in
the frozen records below; :class:`zoo.architectures.faster_rcnn.FasterRCNN` fills them
from a resolved config (the RPN feature already resolved to a layer name).
Inputs are ``data`` ``(B, 3, H, W)`` and ``im_info`` ``(B, 3)`` rows ``[height,
width, scale]`` of the valid image inside ``data``; training adds ``label``
``(B, M, 6)`` as for SSD. The detection and training graphs (:func:`detection_graph`,
:func:`training_graph`) take any number of RPN levels: the FPN builder
(:mod:`symbols.fpn`) uses them too.
"""
import json
from dataclasses import dataclass

import mxnet as mx

from symbols.layers import (StrictNameManager, dense, nms, one_over_count, pool, scalar,
                            scale_gradient, smooth_l1_loss)
from symbols.rpn import RPNHead, proposals, rpn_losses, without_gradient

__all__ = ["BoxHead", "Decoding", "Sampling", "TRAINING_OUTPUTS", "box_head", "box_predictor",
           "detection_graph", "inference_symbol", "rcnn_loss_terms", "training_graph",
           "training_symbol"]

TRAINING_OUTPUTS = ("rpn_cls_loss", "rpn_bbox_loss", "rcnn_cls_loss", "rcnn_bbox_loss",
                    "rpn_label_out", "rcnn_label_out")
"""The training graph's outputs by operator name: RPN class probabilities (loss), RPN box
loss, R-CNN class probabilities (loss), R-CNN box loss, and the RPN and R-CNN labels the
losses were computed against (for metrics)."""


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
    """Per-class NMS over the ``nms_topk`` best class scores (-1: all) and the detections
    kept per image; box deltas ``dw``, ``dh`` clipped at ``delta_clip`` (None: no clip),
    boxes clipped to the image when ``clip_boxes``."""
    nms_threshold: float
    score_threshold: float
    max_detections: int
    nms_topk: int = -1
    delta_clip: float = None
    clip_boxes: bool = True


@dataclass(frozen=True)
class Sampling:
    """Training targets: anchors per image for the RPN and ROIs per image for the head, their
    foreground fractions and IoU thresholds."""
    rpn_batch_size: int
    rpn_fg_fraction: float
    rpn_positive_iou: float
    rpn_negative_iou: float
    rcnn_batch_rois: int
    rcnn_fg_fraction: float
    rcnn_fg_iou: float


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
    normalised to the valid image, clipped to it if ``decoding.clip_boxes`` (class -1 marks
    empty rows)."""
    classes = head.num_classes
    stds = head.box_stds
    prob = mx.sym.softmax(scores, axis=1, name="rcnn_cls_prob")
    prob = mx.sym.slice_axis(prob, axis=1, begin=1, end=None, name="rcnn_fg_prob")
    deltas = mx.sym.Reshape(deltas, shape=(0, -1, 4), name="rcnn_deltas")
    deltas = mx.sym.slice_axis(deltas, axis=1, begin=1, end=None, name="rcnn_fg_deltas")
    deltas = mx.sym.transpose(deltas, axes=(1, 0, 2), name="rcnn_deltas_by_class")
    boxes = mx.sym.slice_axis(rois, axis=1, begin=1, end=5, name="rcnn_roi_boxes")
    boxes = mx.sym.expand_dims(boxes, axis=0, name="rcnn_roi_boxes_batch")
    clip = -1.0 if decoding.delta_clip is None else decoding.delta_clip
    decoded = mx.sym.contrib.box_decode(deltas, boxes, name="rcnn_decode", std0=stds[0],
                                        std1=stds[1], std2=stds[2], std3=stds[3], clip=clip,
                                        format="corner")
    decoded = mx.sym.transpose(decoded, axes=(1, 0, 2), name="rcnn_boxes")
    batch_index = mx.sym.slice_axis(rois, axis=1, begin=0, end=1, name="rcnn_batch_index")
    size = mx.sym.take(im_info, mx.sym.Reshape(batch_index, shape=(-1,), name="rcnn_image_of_roi"),
                       name="rcnn_roi_im_info")
    height = mx.sym.slice_axis(size, axis=1, begin=0, end=1, name="rcnn_roi_height")
    width = mx.sym.slice_axis(size, axis=1, begin=1, end=2, name="rcnn_roi_width")
    extent = mx.sym.concat(width, height, width, height, dim=1, name="rcnn_roi_extent")
    extent = mx.sym.expand_dims(extent, axis=1, name="rcnn_roi_extent_per_class")
    normalised = mx.sym.broadcast_div(decoded, extent, name="rcnn_boxes_normalised")
    if decoding.clip_boxes:
        normalised = mx.sym.clip(normalised, 0.0, 1.0, name="rcnn_boxes_clipped")
    ids = mx.sym.broadcast_like(
        mx.sym.Reshape(mx.sym.contrib.arange_like(prob, axis=1, name="rcnn_class_range"),
                       shape=(1, -1), name="rcnn_class_row"), prob, name="rcnn_class_ids")
    rows = mx.sym.concat(mx.sym.expand_dims(ids, axis=2, name="rcnn_ids_col"),
                         mx.sym.expand_dims(prob, axis=2, name="rcnn_score_col"),
                         normalised, dim=2, name="rcnn_rows")
    rows = mx.sym.Reshape(rows, shape=(-1, rois_per_image * classes, 6),
                          name="rcnn_rows_by_image")
    kept = nms(rows, "rcnn_nms", decoding.nms_threshold, decoding.score_threshold,
               decoding.nms_topk)
    # Fewer candidate rows than max_detections (few ROIs, few classes) caps the output.
    candidates = rois_per_image * classes
    return mx.sym.slice_axis(kept, axis=1, begin=0,
                             end=min(decoding.max_detections, candidates), name="detection")


def _features(backbone, layer):
    body = backbone.body()
    return body.get_internals()[layer + "_output"]


def _c4_level(backbone, rpn_spec):
    feature = _features(backbone, rpn_spec.layer)
    head = RPNHead(rpn_spec.anchors.num_anchors, channels=rpn_spec.channels)
    return head(feature, rpn_spec.anchors), feature


def inference_symbol(backbone, rpn_spec, head, decoding):
    """C4 ``data``, ``im_info`` to detections ``(B, max_detections, 6)``; ``rpn_spec`` an
    :class:`RPN` with the test top-n, ``head`` a :class:`BoxHead`, ``decoding`` a
    :class:`Decoding`."""
    with StrictNameManager():
        level, feature = _c4_level(backbone, rpn_spec)
        return detection_graph(
            [level], lambda rois: box_head(backbone, feature, rois, head, rpn_spec.stride),
            mx.sym.Variable("im_info"), head, rpn_spec.settings, decoding)


def training_symbol(backbone, rpn_spec, head, sampling):
    """C4 training graph with RPN and R-CNN losses; ``rpn_spec`` an :class:`RPN` with the
    training top-n, ``sampling`` a :class:`Sampling`. Outputs are named as
    :data:`TRAINING_OUTPUTS` lists them."""
    with StrictNameManager():
        level, feature = _c4_level(backbone, rpn_spec)
        return training_graph(
            [level], lambda rois: box_head(backbone, feature, rois, head, rpn_spec.stride),
            mx.sym.Variable("im_info"), mx.sym.Variable("label"), head, rpn_spec.settings,
            sampling)


def detection_graph(levels, box_features, im_info, head, settings, decoding):
    """Detections of any Faster R-CNN: proposals from the RPN ``levels`` (each a
    :class:`LevelOutput`), ``box_features(rois)`` the head's vector per ROI, class scores and
    deltas, decoding."""
    rois = proposals(levels, im_info, settings)
    cls_score, bbox_pred = box_predictor(box_features(rois), head.num_classes)
    return decode_detections(rois, cls_score, bbox_pred, im_info, head,
                             settings.post_nms_top_n, decoding)


def training_graph(levels, box_features, im_info, label, head, settings, sampling):
    """The training outputs of any Faster R-CNN (see :func:`detection_graph`): RPN losses
    over every level's anchors, proposals without gradient, sampled ROIs and their losses."""
    rpn_prob, rpn_box_loss, rpn_label = rpn_losses(levels, label, im_info, sampling,
                                                   settings.convention)
    rois = proposals([without_gradient(level) for level in levels], im_info, settings)
    sampled = mx.sym.Custom(rois, label, im_info, name="proposal_target",
                            op_type="zoo_proposal_target", num_classes=head.num_classes,
                            batch_rois=sampling.rcnn_batch_rois,
                            fg_fraction=sampling.rcnn_fg_fraction, fg_iou=sampling.rcnn_fg_iou,
                            box_stds=json.dumps(list(head.box_stds)))
    cls_score, bbox_pred = box_predictor(box_features(sampled["proposal_target_rois_sampled"]),
                                         head.num_classes)
    classes = sampled["proposal_target_cls_label"]
    cls_prob, box_loss = rcnn_loss_terms(cls_score, bbox_pred, classes,
                                         sampled["proposal_target_bbox_target"],
                                         sampled["proposal_target_bbox_weight"])
    return mx.sym.Group([rpn_prob, rpn_box_loss, cls_prob, box_loss,
                         mx.sym.BlockGrad(rpn_label, name="rpn_label_out"),
                         mx.sym.BlockGrad(classes, name="rcnn_label_out")])


def rcnn_loss_terms(cls_score, bbox_pred, classes, bbox_target, bbox_weight):
    """``(class probabilities, box loss)`` of the R-CNN head over its sampled ROIs (rows):
    softmax cross-entropy and smooth L1 (sigma 1) of the target class's deltas, each summed
    and divided by the batch's ROIs, as GluonCV's Faster R-CNN recipe does. (The box term
    was divided by one image's ROIs, the config's ``batch_images``, whatever the batch: 2x
    GluonCV's gradient at 2 images a device.)"""
    cls_prob = mx.sym.SoftmaxOutput(cls_score, classes, name="rcnn_cls_loss",
                                    normalization="batch")
    per_roi = one_over_count(scalar("_greater_equal_scalar", classes, 0, "rcnn_sampled"),
                             "rcnn_per_roi")
    box_loss = smooth_l1_loss(scale_gradient(bbox_pred, per_roi, 2, "rcnn_bbox_pred_scaled"),
                              bbox_target, bbox_weight, "rcnn_bbox", 1.0, 1.0)
    return cls_prob, box_loss
