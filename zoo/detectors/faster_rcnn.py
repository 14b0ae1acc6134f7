"""Faster R-CNN configs: defaults, validation against the backbone graph, input shapes,
losses.

``data_shape`` is the short image side; ``max_size`` bounds the long side, so a
model's reference input is ``data_shape x max_size``.
"""
import types

import numpy as np

from ..modeling import faster_rcnn as symbols

from ..metrics.arrays import to_numpy
from ..validate import Checker, check_backbone_layer, is_int, is_number
from .base import COMMON_DEFAULTS, Architecture

DEFAULTS = types.MappingProxyType(dict(
    COMMON_DEFAULTS,
    data_shape=600,
    max_size=1000,
    batch_images=1,
    anchor_scales=[2, 4, 8, 16, 32],
    anchor_ratios=[0.5, 1, 2],
    rpn_pre_nms_top_n_train=12000,
    rpn_post_nms_top_n_train=2000,
    rpn_pre_nms_top_n_test=6000,
    rpn_post_nms_top_n_test=300,
    rpn_nms_threshold=0.7,
    rpn_min_size=16,
    rpn_batch_size=256,
    rpn_fg_fraction=0.5,
    rpn_positive_iou=0.7,
    rpn_negative_iou=0.3,
    roi_size=[14, 14],
    rcnn_batch_rois=128,
    rcnn_fg_fraction=0.25,
    rcnn_fg_iou=0.5,
    box_stds=[0.1, 0.1, 0.2, 0.2],
    nms_threshold=0.3,
    score_threshold=0.001,
    max_detections=100,
))
REQUIRED = ("backbone", "rpn_feature", "rpn_stride", "head_stage")
POSITIVE_INTS = ("num_classes", "max_size", "batch_images", "rpn_pre_nms_top_n_train",
                 "rpn_post_nms_top_n_train", "rpn_pre_nms_top_n_test", "rpn_post_nms_top_n_test",
                 "rpn_batch_size", "rcnn_batch_rois", "max_detections", "rpn_stride")
FRACTIONS = ("rpn_nms_threshold", "rpn_fg_fraction", "rpn_positive_iou", "rpn_negative_iou",
             "rcnn_fg_fraction", "rcnn_fg_iou", "nms_threshold")
LOSS_NAMES = ("rpn_cls_loss", "rpn_box_loss", "rcnn_cls_loss", "rcnn_box_loss")


class FasterRCNN(Architecture):
    """Two-stage detection in the C4 design. Derived field: ``rpn_layer``, the layer name of
    ``rpn_feature``."""

    name = "faster_rcnn"
    defaults = DEFAULTS
    required = REQUIRED
    loss_names = LOSS_NAMES
    output_names = symbols.TRAINING_OUTPUTS

    def derive(self, spec, backbone, graph):
        """The RPN feature must be the deepest layer at the declared ``rpn_stride``, and
        ``head_stage`` the stage right after it."""
        check_fields(spec)
        check = Checker(spec)
        layer = check_backbone_layer(check, backbone, graph, "rpn_feature", spec["rpn_feature"])
        check.require(graph.stride(layer) == spec["rpn_stride"], "rpn_feature",
                      spec["rpn_feature"], "a layer at rpn_stride = %d, but it has stride %d"
                      % (spec["rpn_stride"], graph.stride(layer)))
        stages = backbone.stages()
        names = [stage.name for stage in stages]
        head = spec["head_stage"]
        check.require(head in names[1:], "head_stage", head,
                      "a stage of %s after the first (%s)" % (backbone.name, ", ".join(names[1:])))
        index = names.index(head)
        check.require(stages[index - 1].layer == layer, "head_stage", head,
                      "the stage that continues from the RPN feature %s (the stage after %s)"
                      % (layer, stages[index - 1].name))
        check_backbone_layer(check, backbone, graph, "head_stage", head)
        return {"rpn_layer": layer}

    def input_shapes(self, spec, batch_size=1):
        return {"data": (batch_size, 3, spec["data_shape"], spec["max_size"]),
                "im_info": (batch_size, 3)}

    def inference_symbol(self, backbone, spec):
        return symbols.inference_symbol(backbone, rpn(spec, "test"), box_head(spec),
                                        decoding(spec))

    def training_symbol(self, backbone, spec):
        return symbols.training_symbol(backbone, rpn(spec, "train"), box_head(spec),
                                       sampling(spec))

    def training_losses(self, named_outputs):
        """RPN and R-CNN cross-entropies over sampled anchors/ROIs and box losses per sample
        (NDArrays or numpy arrays)."""
        rpn_prob, rpn_box, cls_prob, box_loss, rpn_label, rcnn_label = (
            to_numpy(named_outputs[n]) for n in ("rpn_cls_loss", "rpn_bbox_loss", "rcnn_cls_loss",
                                         "rcnn_bbox_loss", "rpn_label_out", "rcnn_label_out"))
        labels = rpn_label.reshape(rpn_label.shape[0], -1).astype(np.int64)
        probs = rpn_prob.reshape(rpn_prob.shape[0], 2, -1)
        batch, anchor = np.nonzero(labels >= 0)
        rpn_ce = -np.log(probs[batch, labels[batch, anchor], anchor] + 1e-12).mean()
        classes = rcnn_label.astype(np.int64)
        rcnn_ce = -np.log(cls_prob[np.arange(len(classes)), classes] + 1e-12).mean()
        return {"rpn_cls_loss": float(rpn_ce),
                "rpn_box_loss": float(rpn_box.sum() / max(len(batch), 1)),
                "rcnn_cls_loss": float(rcnn_ce),
                "rcnn_box_loss": float(box_loss.sum() / len(classes))}

    def describe(self, spec, backbone):
        """The RPN feature map as ``HxW/stride`` and the anchor count, for the checker table."""
        feature = backbone.body().get_internals()[spec["rpn_layer"] + "_output"]
        _, (shape,), _ = feature.infer_shape(data=self.input_shapes(spec)["data"])
        anchors = rpn(spec, "test").num_anchors * shape[2] * shape[3]
        return ("rpn %dx%d/%d, %d rois" % (shape[2], shape[3], spec["rpn_stride"],
                                           spec["rpn_post_nms_top_n_test"]), anchors)


def rpn(spec, stage):
    """The :class:`RPN` of the ``"train"`` or ``"test"`` graph."""
    return symbols.RPN(
        layer=spec["rpn_layer"], stride=spec["rpn_stride"], scales=tuple(spec["anchor_scales"]),
        ratios=tuple(spec["anchor_ratios"]), pre_nms_top_n=spec["rpn_pre_nms_top_n_" + stage],
        post_nms_top_n=spec["rpn_post_nms_top_n_" + stage],
        nms_threshold=spec["rpn_nms_threshold"], min_size=spec["rpn_min_size"])


def box_head(spec):
    return symbols.BoxHead(stage=spec["head_stage"], roi_size=tuple(spec["roi_size"]),
                           num_classes=spec["num_classes"], box_stds=tuple(spec["box_stds"]))


def decoding(spec):
    return symbols.Decoding(nms_threshold=spec["nms_threshold"],
                            score_threshold=spec["score_threshold"],
                            max_detections=spec["max_detections"])


def sampling(spec):
    return symbols.Sampling(
        rpn_batch_size=spec["rpn_batch_size"], rpn_fg_fraction=spec["rpn_fg_fraction"],
        rpn_positive_iou=spec["rpn_positive_iou"], rpn_negative_iou=spec["rpn_negative_iou"],
        rcnn_batch_rois=spec["rcnn_batch_rois"], rcnn_fg_fraction=spec["rcnn_fg_fraction"],
        rcnn_fg_iou=spec["rcnn_fg_iou"], batch_images=spec["batch_images"])


def check_fields(config):
    """Types and ranges of the Faster R-CNN fields; independent of the graph."""
    check = Checker(config)
    for field in POSITIVE_INTS:
        check.require(is_int(config[field]) and config[field] >= 1, field, config[field],
                      "a positive integer")
    check.require(config["max_size"] >= config["data_shape"], "max_size", config["max_size"],
                  "at least data_shape (the short side), %d" % config["data_shape"])
    for field in FRACTIONS:
        check.require(is_number(config[field]) and 0 < config[field] <= 1, field, config[field],
                      "a number in (0, 1]")
    check.require(config["rpn_negative_iou"] < config["rpn_positive_iou"], "rpn_negative_iou",
                  config["rpn_negative_iou"], "below rpn_positive_iou")
    for stage in ("train", "test"):
        pre, post = "rpn_pre_nms_top_n_" + stage, "rpn_post_nms_top_n_" + stage
        check.require(config[post] <= config[pre], post, config[post],
                      "at most %s = %d" % (pre, config[pre]))
    for field in ("anchor_scales", "anchor_ratios"):
        values = config[field]
        check.require(isinstance(values, list) and values and all(
            is_number(v) and v > 0 for v in values) and len(set(values)) == len(values),
            field, values, "a non-empty list of distinct positive numbers")
    roi = config["roi_size"]
    check.require(isinstance(roi, list) and len(roi) == 2
                  and all(is_int(v) and v > 0 for v in roi),
                  "roi_size", roi, "[height, width] of the pooled ROI features")
    check.require(is_number(config["score_threshold"]) and 0 <= config["score_threshold"] < 1,
                  "score_threshold", config["score_threshold"], "a number in [0, 1)")
    check.require(isinstance(config["box_stds"], list) and len(config["box_stds"]) == 4 and all(
        is_number(v) and v > 0 for v in config["box_stds"]), "box_stds", config["box_stds"],
        "four positive numbers")
