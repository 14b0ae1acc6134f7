"""Faster R-CNN configs: defaults, validation against the backbone graph, input shapes,
losses.

``data_shape`` is the short image side; ``max_size`` bounds the long side, so a
model's reference input is ``data_shape x max_size``.
"""
import numpy as np

from zoo.schema import preprocessing as image_preprocessing
from symbols import box_coder
from symbols import faster_rcnn as symbols
from symbols import rpn as rpn_symbols

from zoo.metrics.arrays import to_numpy
from zoo.schema import anchors as anchor_fit
from zoo.schema.fields import (DERIVED, FRACTION, REQUIRED, Bool, Field, Int, List, Number,
                               Optional, Schema, Str)
from zoo.schema.checks import Checker, check_backbone_layer
from zoo.architectures.base import Architecture

__all__ = ["FasterRCNN", "LOSS_NAMES", "SCHEMA", "box_head", "check_fields", "decoding",
           "proposal_settings", "rpn", "sampling"]

SCHEMA = Schema("faster_rcnn", [
    Field("rpn_feature", Str(nonempty=True), REQUIRED,
          "the RPN's layer: a stage name or an internal layer (checked: deepest at its "
          "resolution, stride `rpn_stride`)"),
    Field("rpn_stride", Int(1), REQUIRED, "the stride of `rpn_feature`"),
    Field("head_stage", Str(nonempty=True), REQUIRED,
          "the stage that continues from `rpn_feature`, run on every ROI as box head"),
    Field("max_size", Int(1), 1000,
          "long-side bound; the reference input is `data_shape x max_size`"),
    Field("batch_images", Int(1), 1,
          "no effect: the losses divide by the anchors and ROIs sampled in the batch (kept so "
          "that older configs and artifacts load)"),
    Field("size_divisor", Optional(Int(1)), None,
          "a batch's canvas sides are multiples of it; null: the deepest stride the RPN reads "
          "(1 feeds a single image unpadded, as GluonCV does)"),
    Field("rpn_channels", Int(1), rpn_symbols.RPN_CHANNELS, "width of the RPN's 3x3 convolution"),
    Field("anchor_scales", List(Number(0, low_open=True), distinct=True), [2, 4, 8, 16, 32],
          "anchor sizes in units of the stride"),
    Field("anchor_ratios", List(Number(0, low_open=True), distinct=True), [0.5, 1, 2],
          "anchor aspect ratios"),
    Field("rpn_pre_nms_top_n_train", Int(1), 12000, "proposals kept before RPN NMS (training)"),
    Field("rpn_post_nms_top_n_train", Int(1), 2000, "proposals kept after RPN NMS (training)"),
    Field("rpn_pre_nms_top_n_test", Int(1), 6000, "proposals kept before RPN NMS (inference)"),
    Field("rpn_post_nms_top_n_test", Int(1), 300, "proposals kept after RPN NMS (inference)"),
    Field("rpn_nms_threshold", FRACTION, 0.7, "IoU of the RPN's NMS"),
    Field("rpn_min_size", Int(0), 16, "smallest proposal side in pixels"),
    Field("rpn_delta_clip", Optional(Number(0, low_open=True)), box_coder.DELTA_CLIP,
          "largest dw, dh the RPN's decoding applies (null: no clip)"),
    Field("rcnn_convention", Str(choices=rpn_symbols.CONVENTIONS), "zoo",
          "zoo: proposals as symbols.rpn says; gluoncv: as GluonCV's RPN makes "
          "them (anchors of rounded pixel windows, every anchor decoded, min size as a "
          "window side + 1 in input pixels, one NMS over the pre-NMS top-n of all levels, "
          "empty rows kept as -1 boxes; the FPN level of a box from its window size)"),
    Field("rpn_batch_size", Int(1), 256, "anchors sampled per image"),
    Field("rpn_fg_fraction", FRACTION, 0.5, "largest fraction of positives among them"),
    Field("rpn_positive_iou", FRACTION, 0.7, "IoU from which an anchor is positive"),
    Field("rpn_negative_iou", FRACTION, 0.3, "IoU below which an anchor is negative"),
    Field("roi_size", List(Int(1), length=2, note="[height, width]"), [14, 14],
          "[height, width] of the pooled ROI features"),
    Field("rcnn_batch_rois", Int(1), 128, "ROIs sampled per image"),
    Field("rcnn_fg_fraction", FRACTION, 0.25, "largest fraction of positives among them"),
    Field("rcnn_fg_iou", FRACTION, 0.5, "IoU from which an ROI is positive"),
    Field("box_stds", List(Number(0, low_open=True), length=4), [0.1, 0.1, 0.2, 0.2],
          "box-regression target scales of x, y, w, h"),
    Field("rcnn_delta_clip", Optional(Number(0, low_open=True)), None,
          "largest dw, dh the box head's decoding applies (null: no clip)"),
    Field("clip_detections", Bool(), True, "detections clipped to the image"),
    Field("max_detections", Int(1), 100, "detections kept per image"),
    Field("rpn_layer", Str(nonempty=True), DERIVED, "the layer name of `rpn_feature`"),
], defaults={"data_shape": 600, "nms_threshold": 0.3, "nms_topk": 400,
             "score_threshold": 0.001})
LOSS_NAMES = ("rpn_cls_loss", "rpn_box_loss", "rcnn_cls_loss", "rcnn_box_loss")


class FasterRCNN(Architecture):
    """Two-stage detection in the C4 design. Derived field: ``rpn_layer``, the layer name of
    ``rpn_feature``."""

    # The zoo's default before the lr followed the batch (0.01 at the default batch 16);
    # GluonCV's recipes take 0.01 at 8 images (1 a GPU) from a pretrained backbone.
    recipe_lr = (0.01, 16)
    # MMDetection's Faster R-CNN schedules warm up over 500 iterations (Detectron2's over
    # 1000). From scratch on 1600x1200 photos at batch 3, the lr scaled to 0.001875 without
    # one diverged in epoch 2; after a warm-up of 100 updates it trained on, no spike in 131
    # updates (docs/training.md, "The recipe lr comes with the recipe's warm-up").
    recipe_warmup = 500
    prediction_params = r"^(rpn|rcnn)_(cls_score|bbox_pred)_(weight|bias)$"
    class_layers = ((r"rcnn_cls_score_(weight|bias)", 1), (r"rcnn_bbox_pred_(weight|bias)", 4))
    schema = SCHEMA
    loss_names = LOSS_NAMES
    output_names = symbols.TRAINING_OUTPUTS

    def check_fields(self, spec):
        check_fields(spec)

    def derive(self, spec, backbone, graph):
        """The RPN feature must be the deepest layer at the declared ``rpn_stride``, and
        ``head_stage`` the stage right after it."""
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

    def preprocessing(self, spec):
        """Short side to ``data_shape``, long side at most ``max_size``, batches padded to a
        multiple of :meth:`size_divisor`."""
        return image_preprocessing.short_side(spec, self.size_divisor(spec))

    def size_divisor(self, spec):
        """``size_divisor``, by default the deepest stride the trunk reaches, the RPN's:
        padding to it keeps every feature cell aligned with its anchors."""
        return spec["size_divisor"] or spec["rpn_stride"]

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

    def positive_anchors(self, named_outputs):
        """RPN anchors labelled object (1; 0 is background, -1 not sampled)."""
        return int((to_numpy(named_outputs["rpn_label_out"]) == 1).sum())

    def anchor_maps(self, spec, backbone):
        """The RPN's anchors on its map (:func:`rpn_anchor_maps`)."""
        return rpn_anchor_maps(spec, [rpn(spec, "train").anchors])

    def fitted_anchors(self, spec, backbone, sides):
        """``anchor_scales`` (units of ``rpn_stride``) of a size ladder on the RPN's map
        (:func:`zoo.schema.anchors.ladder_sizes`), and ``anchor_ratios`` shifted to the
        boxes' where that matches more of them (:func:`with_fitted_ratios`)."""
        stride = spec["rpn_stride"]
        sizes = anchor_fit.ladder_sizes(sides, [len(spec["anchor_scales"])], [stride],
                                        np.inf)[0]
        return with_fitted_ratios(self, spec, backbone, sides, {
            "anchor_scales": [round(size / stride, 4) for size in sizes]})

    def describe(self, spec, backbone):
        """The RPN feature map as ``HxW/stride`` and the anchor count, for the checker table."""
        feature = backbone.body().get_internals()[spec["rpn_layer"] + "_output"]
        _, (shape,), _ = feature.infer_shape(data=self.input_shapes(spec)["data"])
        anchors = rpn(spec, "test").anchors.num_anchors * shape[2] * shape[3]
        return ("rpn %dx%d/%d, %d rois" % (shape[2], shape[3], spec["rpn_stride"],
                                           spec["rpn_post_nms_top_n_test"]), anchors)


def rpn(spec, stage):
    """The :class:`RPN` of the ``"train"`` or ``"test"`` graph."""
    anchors = rpn_symbols.AnchorLevel("c4", spec["rpn_stride"], tuple(spec["anchor_scales"]),
                                  tuple(spec["anchor_ratios"]))
    return rpn_symbols.RPN(layer=spec["rpn_layer"], anchors=anchors,
                       settings=proposal_settings(spec, stage), channels=spec["rpn_channels"])


def rpn_anchor_maps(spec, levels):
    """``(maps, iou)`` of the RPN anchor ``levels`` (:class:`~symbols.rpn.AnchorLevel`):
    each level's anchor shapes in the config's box convention, and the IoU from which an
    anchor is positive."""
    maps = [anchor_fit.AnchorMap(level.stride, tuple(
        (float(x2 - x1), float(y2 - y1)) for x1, y1, x2, y2 in rpn_symbols.level_base_anchors(
            level, spec["rcnn_convention"]))) for level in levels]
    return maps, spec["rpn_positive_iou"]


def with_fitted_ratios(arch, spec, backbone, sides, fields):
    """``fields`` (fitted anchor sizes), with ``anchor_ratios`` shifted to the boxes' median
    aspect (:func:`zoo.schema.anchors.shifted_ratios`; the RPN's ratio is height / width)
    where the anchors then match more of the boxes ``sides``."""
    ratios = anchor_fit.shifted_ratios(sides[:, ::-1], [spec["anchor_ratios"]])[0]

    def recall(fitted):
        return anchor_fit.best_possible_recall(
            sides, *arch.anchor_maps(spec.merged(fitted), backbone))
    if recall(dict(fields, anchor_ratios=ratios)) > recall(fields):
        return dict(fields, anchor_ratios=ratios)
    return fields


def proposal_settings(spec, stage):
    """The :class:`~symbols.rpn.ProposalSettings` of the ``"train"`` or
    ``"test"`` graph."""
    return rpn_symbols.ProposalSettings(
        pre_nms_top_n=spec["rpn_pre_nms_top_n_" + stage],
        post_nms_top_n=spec["rpn_post_nms_top_n_" + stage],
        nms_threshold=spec["rpn_nms_threshold"], min_size=spec["rpn_min_size"],
        delta_clip=spec["rpn_delta_clip"], convention=spec["rcnn_convention"])


def box_head(spec):
    return symbols.BoxHead(stage=spec["head_stage"], roi_size=tuple(spec["roi_size"]),
                           num_classes=spec["num_classes"], box_stds=tuple(spec["box_stds"]))


def decoding(spec):
    return symbols.Decoding(nms_threshold=spec["nms_threshold"],
                            score_threshold=spec["score_threshold"],
                            max_detections=spec["max_detections"], nms_topk=spec["nms_topk"],
                            delta_clip=spec["rcnn_delta_clip"],
                            clip_boxes=spec["clip_detections"])


def sampling(spec):
    return symbols.Sampling(
        rpn_batch_size=spec["rpn_batch_size"], rpn_fg_fraction=spec["rpn_fg_fraction"],
        rpn_positive_iou=spec["rpn_positive_iou"], rpn_negative_iou=spec["rpn_negative_iou"],
        rcnn_batch_rois=spec["rcnn_batch_rois"], rcnn_fg_fraction=spec["rcnn_fg_fraction"],
        rcnn_fg_iou=spec["rcnn_fg_iou"])


def check_fields(config, levels=1):
    """What the schema cannot say per field: how sizes, IoUs and proposal counts relate;
    ``levels`` is the number of RPN levels, each giving ``rpn_pre_nms_top_n`` candidates."""
    check = Checker(config)
    check.require(config["max_size"] >= config["data_shape"], "max_size", config["max_size"],
                  "at least data_shape (the short side), %d" % config["data_shape"])
    check.require(config["rpn_negative_iou"] < config["rpn_positive_iou"], "rpn_negative_iou",
                  config["rpn_negative_iou"], "below rpn_positive_iou = %g"
                  % config["rpn_positive_iou"])
    for stage in ("train", "test"):
        pre, post = "rpn_pre_nms_top_n_" + stage, "rpn_post_nms_top_n_" + stage
        per_level = "" if levels == 1 else " x %d levels" % levels
        check.require(config[post] <= config[pre] * levels, post, config[post],
                      "at most %s%s = %d" % (pre, per_level, config[pre] * levels))


ARCHITECTURE = FasterRCNN  # the implementation of arch "faster_rcnn"
