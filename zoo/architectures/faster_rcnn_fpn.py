"""Faster R-CNN with a feature pyramid: config fields, validation of the pyramid's taps
against the backbone graph, and the graph builders' arguments.

The taps (``fpn_features``) are stage names or layers, shallowest first. Each must be the
deepest trunk layer at its resolution (a tap inside a stage would silently drop the rest of
the stage, as in MXNet PR #8998), have the stride ``fpn_strides`` declares, and the strides
must double from level to level. Inference, input shapes, preprocessing and losses are those
of :class:`zoo.architectures.faster_rcnn.FasterRCNN`.
"""
from symbols import fpn as symbols
from symbols.layers import StrictNameManager
from zoo.schema.fields import (DERIVED, REQUIRED, Bool, Field, Int, List, Number, Optional, Schema,
                               Str)
from zoo.schema.checks import Checker, check_backbone_layer
from zoo.architectures import faster_rcnn as c4
from zoo.schema.anchors import ladder_sizes
from zoo.architectures.faster_rcnn import FasterRCNN

__all__ = ["FasterRCNNFPN", "SCHEMA", "anchors", "box_head", "check_fields", "pyramid"]

PER_TAP = "fpn_features"
"""Length rule of the per-level lists: one entry per tapped backbone layer."""

NEW_DEFAULTS = {
    "roi_size": [7, 7], "rpn_min_size": 0, "rcnn_batch_rois": 512,
    "rpn_pre_nms_top_n_train": 2000, "rpn_pre_nms_top_n_test": 1000,
    "rpn_post_nms_top_n_train": 1000, "rpn_post_nms_top_n_test": 300}
"""C4 fields whose FPN defaults differ (Detectron2's, but 300 test proposals for speed)."""


def _c4_field(name):
    field = c4.SCHEMA.fields[name]
    return field.with_default(NEW_DEFAULTS[name]) if name in NEW_DEFAULTS else field


SCHEMA = Schema("faster_rcnn_fpn", [
    Field("fpn_features", List(Str(nonempty=True)), REQUIRED,
          "the pyramid's backbone taps, shallowest first: stage names or internal layers "
          "(checked: each the deepest at its resolution)"),
    Field("fpn_strides", List(Int(1), length=PER_TAP), REQUIRED,
          "the stride of each tap, doubling from level to level (checked against the graph)"),
    Field("fpn_channels", Int(1), 256, "channels of every pyramid level and of the RPN head"),
    Field("fpn_batch_norm", Bool(), False,
          "batch normalisation after each pyramid convolution (for backbones trained from "
          "scratch; folded into the convolutions when deployed)"),
    Field("rpn_extra_levels", Int(0), 1,
          "coarser RPN-only levels, each a stride-2 subsampling of the one below"),
    Field("fpn_extra_level", Str(choices=symbols.EXTRA_LEVELS), "max_pool",
          "how each extra level subsamples: max_pool of the level below, or lateral_conv, a "
          "3x3 stride-2 convolution of the level below, the first of the coarsest lateral "
          "(GluonCV's P6)"),
    Field("rpn_channels", Optional(Int(1)), None,
          "width of the RPN's 3x3 convolution (null: fpn_channels)"),
    Field("anchor_sizes", List(Number(0, low_open=True), distinct=True),
          [32, 64, 128, 256, 512],
          "anchor side in pixels, one per RPN level (the taps, then the extra levels)"),
    _c4_field("max_size"), _c4_field("size_divisor"), _c4_field("batch_images"),
    _c4_field("anchor_ratios"),
    Field("rpn_pre_nms_top_n_train", Int(1), NEW_DEFAULTS["rpn_pre_nms_top_n_train"],
          "proposals kept per level before RPN NMS (training)"),
    _c4_field("rpn_post_nms_top_n_train"),
    Field("rpn_pre_nms_top_n_test", Int(1), NEW_DEFAULTS["rpn_pre_nms_top_n_test"],
          "proposals kept per level before RPN NMS (inference; of all levels together in "
          "the gluoncv convention)"),
    _c4_field("rpn_post_nms_top_n_test"), _c4_field("rpn_nms_threshold"),
    _c4_field("rpn_min_size"), _c4_field("rpn_delta_clip"), _c4_field("rcnn_convention"),
    _c4_field("rpn_batch_size"), _c4_field("rpn_fg_fraction"),
    _c4_field("rpn_positive_iou"), _c4_field("rpn_negative_iou"), _c4_field("roi_size"),
    Field("roi_canonical_size", Number(0, low_open=True), 224,
          "a box of this size (square root of its area, pixels) pools from level "
          "`roi_canonical_level`"),
    Field("roi_canonical_level", Int(0), 4, "the level (stride 2^level) of such a box"),
    Field("head_units", Int(1), 1024, "units of each of the box head's two fc layers"),
    _c4_field("rcnn_batch_rois"), _c4_field("rcnn_fg_fraction"), _c4_field("rcnn_fg_iou"),
    _c4_field("box_stds"), _c4_field("rcnn_delta_clip"), _c4_field("clip_detections"),
    _c4_field("max_detections"),
    Field("fpn_layers", List(Str(nonempty=True)), DERIVED, "the layer name of each tap"),
], defaults={"data_shape": 600, "nms_threshold": 0.5, "nms_topk": 400,
             "score_threshold": c4.SCHEMA.defaults()["score_threshold"]})


class FasterRCNNFPN(FasterRCNN):
    """Two-stage detection on a feature pyramid. Derived field: ``fpn_layers``, the layer
    name of each tap."""

    schema = SCHEMA

    def check_fields(self, spec):
        check_fields(spec)

    def derive(self, spec, backbone, graph):
        """Each tap is proved from the graph; its stride is the declared one, and the strides
        double from level to level."""
        check = Checker(spec)
        layers = [check_backbone_layer(check, backbone, graph, "fpn_features[%d]" % i, name)
                  for i, name in enumerate(spec["fpn_features"])]
        for i, (layer, stride) in enumerate(zip(layers, spec["fpn_strides"])):
            check.require(graph.stride(layer) == stride, "fpn_strides[%d]" % i, stride,
                          "the stride of %s, %d" % (spec["fpn_features"][i], graph.stride(layer)))
        return {"fpn_layers": layers}

    def size_divisor(self, spec):
        """``size_divisor``, by default the coarsest tap's stride: padding to it keeps every
        level's cells aligned with their anchors."""
        return spec["size_divisor"] or spec["fpn_strides"][-1]

    def inference_symbol(self, backbone, spec):
        return symbols.inference_symbol(backbone, pyramid(spec), anchors(spec), box_head(spec),
                                        c4.proposal_settings(spec, "test"), c4.decoding(spec))

    def training_symbol(self, backbone, spec):
        return symbols.training_symbol(backbone, pyramid(spec), anchors(spec), box_head(spec),
                                       c4.proposal_settings(spec, "train"), c4.sampling(spec))

    def anchor_maps(self, spec, backbone):
        """Every RPN level's anchors (:func:`~zoo.architectures.faster_rcnn.rpn_anchor_maps`)."""
        return c4.rpn_anchor_maps(spec, anchors(spec))

    def fitted_anchors(self, spec, backbone, sides):
        """``anchor_sizes`` (pixels, one per level) of a size ladder over the RPN levels
        (:func:`zoo.schema.anchors.ladder_sizes`), and ``anchor_ratios`` shifted to the
        boxes' where that matches more of them."""
        strides = [level.stride for level in anchors(spec)]
        sizes = ladder_sizes(sides, [1] * len(strides), strides, float("inf"))
        return c4.with_fitted_ratios(self, spec, backbone, sides, {
            "anchor_sizes": [round(size[0], 2) for size in sizes]})

    def describe(self, spec, backbone):
        """Every RPN level as ``name HxW/stride`` and the anchor count, for the checker table."""
        data = self.input_shapes(spec)["data"]
        levels, count = [], 0
        with StrictNameManager():
            features = symbols.pyramid_features(backbone, pyramid(spec))
        for level in anchors(spec):
            _, (shape,), _ = features[level.tag].infer_shape(data=data)
            levels.append("%s %dx%d/%d" % (level.tag, shape[2], shape[3], level.stride))
            count += level.num_anchors * shape[2] * shape[3]
        return "fpn " + ", ".join(levels) + ", %d rois" % spec["rpn_post_nms_top_n_test"], count


def pyramid(spec):
    return symbols.Pyramid(layers=tuple(spec["fpn_layers"]), strides=tuple(spec["fpn_strides"]),
                           channels=spec["fpn_channels"], extra_levels=spec["rpn_extra_levels"],
                           batch_norm=spec["fpn_batch_norm"], extra_level=spec["fpn_extra_level"],
                           rpn_channels=spec["rpn_channels"])


def anchors(spec):
    return symbols.anchor_levels(pyramid(spec), spec["anchor_sizes"], spec["anchor_ratios"])


def box_head(spec):
    return symbols.PyramidBoxHead(
        roi_size=tuple(spec["roi_size"]), num_classes=spec["num_classes"],
        box_stds=tuple(spec["box_stds"]), units=spec["head_units"],
        canonical_size=spec["roi_canonical_size"], canonical_level=spec["roi_canonical_level"],
        convention=spec["rcnn_convention"])


def check_fields(config):
    """What the schema cannot say per field: strides doubling, one anchor size per RPN level,
    and how sizes and proposal counts relate."""
    check = Checker(config)
    strides = config["fpn_strides"]
    for i in range(1, len(strides)):
        check.require(strides[i] == 2 * strides[i - 1], "fpn_strides[%d]" % i, strides[i],
                      "twice the previous level's stride, %d" % (2 * strides[i - 1]))
    levels = len(strides) + config["rpn_extra_levels"]
    check.require(len(config["anchor_sizes"]) == levels, "anchor_sizes", config["anchor_sizes"],
                  "one size per RPN level: %d (%d taps + rpn_extra_levels %d)"
                  % (levels, len(strides), config["rpn_extra_levels"]))
    c4.check_fields(config, levels)


ARCHITECTURE = FasterRCNNFPN  # the implementation of arch "faster_rcnn_fpn"
