"""SSD configs: defaults, validation against the backbone graph, input shapes, losses."""
import mxnet as mx
import numpy as np

from symbols import ssd as symbols

from zoo.schema import anchors
from zoo.schema.graph import effective_stride
from zoo.metrics.arrays import to_numpy
from zoo.schema.fields import (DERIVED, FRACTION, REQUIRED, Bool, Field, Int, List, Number,
                               Optional, Schema, Str)
from zoo.schema.checks import Checker, check_backbone_layer
from zoo.architectures.base import Architecture

__all__ = ["LOSS_NAMES", "SCHEMA", "SSD", "anchor_boxes", "check_fields", "decoding",
           "feature_shapes", "matching"]

MAX_ANCHOR_SIZE = 1.2
PER_MAP = "from_layers"
"""Length rule of the per-feature-map lists: one entry per ``from_layers`` entry."""

SCHEMA = Schema("ssd", [
    Field("from_layers", List(Str()), REQUIRED,
          "per feature map: a stage name (`res4`), any internal layer name, or `\"\"` for an "
          "extra block on the previous map"),
    Field("num_filters", List(Int(), length=PER_MAP), REQUIRED,
          "per map: an extra block's width; -1 for a backbone tap (> 0 adds a 1x1 projection)"),
    Field("strides", List(Int(), length=PER_MAP), REQUIRED,
          "per map: an extra block's stride; -1 for a backbone tap"),
    Field("pads", List(Int(), length=PER_MAP), REQUIRED,
          "per map: an extra block's padding; -1 for a backbone tap"),
    Field("normalizations", List(Number(0, low_open=True, special=(-1,)), length=PER_MAP),
          REQUIRED, "per map: -1, or the initial scale of a learned L2 normalisation"),
    Field("sizes", List(List(Number(0, MAX_ANCHOR_SIZE, low_open=True, what="an anchor size",
                                    note="a fraction of the image side")), length=PER_MAP),
          REQUIRED, "per map: anchor sizes as fractions of the image side"),
    Field("ratios", List(List(Number(*anchors.ASPECT_RANGE, what="an aspect ratio"), distinct=True),
                         length=PER_MAP), REQUIRED, "per map: anchor aspect ratios"),
    Field("steps", Optional(List(Number(0, low_open=True, special=(-1,), note="pixels"),
                                 length=PER_MAP)), None,
          "per map: anchor steps in pixels (-1 or null: derived from the map size)"),
    Field("check_maps", Bool(), True,
          "refuse feature maps that do not shrink strictly and steps that do not tile their "
          "map over the image; false accepts GluonCV's (ssd_300_mobilenet0.25's steps of "
          "half the maps' strides, extra blocks on a 1x1 map at small inputs)"),
    Field("extra_use_bn", Bool(), True, "batch normalisation in the extra blocks"),
    Field("extra_style", Str(choices=symbols.EXTRA_STYLES), "zoo",
          "zoo: an extra block's 1x1 at half its width, learned-scale batch norm; gluoncv: "
          "GluonCV's, the 1x1 at full width, batch norm with scale fixed at 1 and eps 1e-3"),
    Field("post_processing", Str(choices=symbols.POST_PROCESSING), "multibox",
          "multibox: MultiBoxDetection (each anchor's best class, boxes clipped before NMS); "
          "per_class: GluonCV's (every class of every anchor, unclipped boxes, NMS per class)"),
    Field("overlap_threshold", FRACTION, 0.5, "IoU at which an anchor matches a box"),
    Field("negative_mining_ratio", Number(0, low_open=True), 3.0,
          "hard negatives kept per positive anchor"),
    Field("negative_mining_thresh", FRACTION, 0.5,
          "IoU below which an anchor may be a hard negative"),
    Field("box_loss_weight", Number(0, low_open=True), 1.0,
          "weight of the box term against the class term (GluonCV's SSDMultiBoxLoss lambd)"),
    Field("variances", List(Number(0, low_open=True), length=4), [0.1, 0.1, 0.2, 0.2],
          "box-encoding variances of x, y, w, h"),
    Field("force_suppress", Bool(), False, "NMS across classes, not per class"),
    Field("feature_layers", List(Str()), DERIVED, "the backbone layer of each tapped map"),
    Field("feature_channels", List(Int(1)), DERIVED, "the channels of each map"),
], defaults={"data_shape": 512, "nms_threshold": 0.45, "nms_topk": 400,
             "score_threshold": symbols.DETECTION_THRESHOLD})
LOSS_NAMES = ("cls_loss", "box_loss")


class SSD(Architecture):
    """Single-shot detection on backbone layers plus extra blocks. Derived fields:
    ``feature_layers`` (layer names), ``feature_channels`` and ``steps`` (-1 where the
    config derives them from the map size)."""

    # 0.0025 at batch 8; make demo's recipe sets 4x it (zoo.jobs.recipes), which on small
    # objects in tiles spiked (docs/training.md, "Small objects in large photos")
    recipe_lr = (0.005, 16)
    prediction_params = r"^head\d+_(cls|loc)_(weight|bias)$"
    class_layers = ((r"head\d+_cls_(weight|bias)", 1),)
    schema = SCHEMA
    loss_names = LOSS_NAMES
    output_names = symbols.TRAINING_OUTPUTS

    def check_fields(self, spec):
        check_fields(spec)

    def derive(self, spec, backbone, graph):
        check = Checker(spec)
        layers = [check_backbone_layer(check, backbone, graph, "from_layers[%d]" % i, name)
                  if name else "" for i, name in enumerate(spec["from_layers"])]
        shapes = feature_shapes(spec, backbone, layers)
        return {"feature_layers": layers,
                "feature_channels": [shape[1] for shape in shapes],
                "steps": check_feature_maps(spec, [shape[2] for shape in shapes],
                                            lambda: smallest_shrinking_shape(spec, backbone,
                                                                             layers))}

    def input_shapes(self, spec, batch_size=1):
        side = spec["data_shape"]
        return {"data": (batch_size, 3, side, side)}

    def inference_symbol(self, backbone, spec):
        return symbols.inference_symbol(backbone, feature_maps(spec), anchor_boxes(spec),
                                        spec["num_classes"], decoding(spec))

    def training_symbol(self, backbone, spec, with_detections=False):
        """``with_detections`` adds :data:`symbols.ssd.DETECTION_OUTPUT` (for a metric;
        training itself does not need it)."""
        return symbols.training_symbol(backbone, feature_maps(spec), anchor_boxes(spec),
                                       spec["num_classes"], decoding(spec), matching(spec),
                                       with_detections)

    def training_losses(self, named_outputs):
        """Mean cross-entropy over the anchors that count and smooth L1 per positive anchor
        (NDArrays or numpy arrays)."""
        cls_prob, loc_loss, cls_target = (to_numpy(named_outputs[n])
                                          for n in ("cls_prob", "loc_loss", "cls_label"))
        target = cls_target.astype(np.int64)
        valid = target >= 0
        picked = np.take_along_axis(cls_prob, np.maximum(target, 0)[:, None, :], axis=1)[:, 0]
        positives = max(int((target > 0).sum()), 1)
        return {"cls_loss": float(-np.log(picked[valid] + 1e-12).mean()) if valid.any() else 0.0,
                "box_loss": float(loc_loss.sum() / positives)}

    def positive_anchors(self, named_outputs):
        """Anchors whose class target is an object (0 is background, -1 ignored)."""
        return int((to_numpy(named_outputs["cls_label"]) > 0).sum())

    def anchor_maps(self, spec, backbone):
        """Each map's ``MultiBoxPrior`` anchors at its step (its own cell, where the config
        derives it from the map), and ``overlap_threshold``."""
        side = spec["data_shape"]
        shapes = feature_shapes(spec, backbone, spec["feature_layers"])
        maps = [anchors.AnchorMap(step if step > 0 else side / shape[2],
                                  anchors.prior_shapes(sizes, ratios, side))
                for step, shape, sizes, ratios in zip(spec["steps"], shapes, spec["sizes"],
                                                      spec["ratios"])]
        return maps, spec["overlap_threshold"]

    def fitted_anchors(self, spec, backbone, sides):
        """``sizes`` fitted by :func:`zoo.schema.anchors.ladder_sizes` (as fractions of the
        side, as many per map as before), and ``ratios`` shifted to the boxes' aspect
        (:func:`zoo.schema.anchors.shifted_ratios`) where that matches more of them."""
        side = spec["data_shape"]
        maps, iou = self.anchor_maps(spec, backbone)
        fitted = anchors.ladder_sizes(sides, [len(sizes) for sizes in spec["sizes"]],
                                      [level.stride for level in maps], MAX_ANCHOR_SIZE * side)
        # four decimals: a readable config, and rounding keeps the sizes' order
        sizes = [[round(size / side, 4) for size in per_map] for per_map in fitted]
        ratios = anchors.shifted_ratios(sides, spec["ratios"])

        def recall(ratio_lists):
            return anchors.best_possible_recall(sides, [
                anchors.AnchorMap(level.stride, anchors.prior_shapes(s, r, side))
                for level, s, r in zip(maps, sizes, ratio_lists)], iou)
        if recall(ratios) > recall(spec["ratios"]):
            return {"sizes": sizes, "ratios": ratios}
        return {"sizes": sizes}

    def describe(self, spec, backbone):
        """Feature maps as ``HxW/stride`` and the anchor count, for the checker table."""
        side = spec["data_shape"]
        maps = " ".join("%dx%d/%d" % (s[2], s[3], effective_stride(side, s[2]))
                        for s in feature_shapes(spec, backbone, spec["feature_layers"]))
        prior = symbols.predictions(backbone, feature_maps(spec), anchor_boxes(spec),
                                    spec["num_classes"])[2]
        _, out_shapes, _ = prior.infer_shape(**self.input_shapes(spec))
        return maps, out_shapes[0][1]


def feature_maps(spec):
    return symbols.FeatureMaps(
        layers=tuple(spec["feature_layers"]), filters=tuple(spec["num_filters"]),
        strides=tuple(spec["strides"]), pads=tuple(spec["pads"]), use_bn=spec["extra_use_bn"],
        normalizations=tuple(spec["normalizations"]), channels=tuple(spec["feature_channels"]),
        extra_style=spec["extra_style"])


def anchor_boxes(spec):
    side = spec["data_shape"]
    return symbols.AnchorBoxes(
        sizes=tuple(map(tuple, spec["sizes"])), ratios=tuple(map(tuple, spec["ratios"])),
        steps=tuple(step / side if step > 0 else -1.0 for step in spec["steps"]))


def decoding(spec):
    return symbols.Decoding(variances=tuple(spec["variances"]),
                            nms_threshold=spec["nms_threshold"], nms_topk=spec["nms_topk"],
                            force_suppress=spec["force_suppress"],
                            score_threshold=spec["score_threshold"],
                            method=spec["post_processing"])


def matching(spec):
    return symbols.Matching(overlap_threshold=spec["overlap_threshold"],
                            negative_mining_ratio=spec["negative_mining_ratio"],
                            negative_mining_thresh=spec["negative_mining_thresh"],
                            box_loss_weight=spec["box_loss_weight"])


def feature_shapes(spec, backbone, layers):
    """``(1, C, H, W)`` of every map the heads see, the backbone taps being ``layers``."""
    features = symbols.multi_scale_features(
        backbone.body(), layers, spec["num_filters"], spec["strides"], spec["pads"],
        spec["extra_use_bn"], spec["extra_style"])
    side = spec["data_shape"]
    _, out_shapes, _ = mx.sym.Group(features).infer_shape(data=(1, 3, side, side))
    return [tuple(shape) for shape in out_shapes]


def check_fields(config):
    """What the schema cannot say per field: which entries a backbone tap and an extra block
    allow, and anchor sizes that do not shrink on coarser maps."""
    check = Checker(config)
    check.require(config["from_layers"][0], "from_layers[0]", config["from_layers"][0],
                  "a backbone layer: extra layers need a feature map to start from")
    for i, layer in enumerate(config["from_layers"]):
        at = "[%d]" % i
        filters, stride, pad = (config[f][i] for f in ("num_filters", "strides", "pads"))
        if layer:
            check.require(filters == -1 or filters > 0, "num_filters" + at, filters,
                          "-1 (use the backbone layer as is) or a positive width")
            check.require(stride == -1, "strides" + at, stride, "-1 for a backbone layer")
            check.require(pad == -1, "pads" + at, pad, "-1 for a backbone layer")
        else:
            check.require(filters >= 2, "num_filters" + at, filters,
                          "an integer >= 2 for an extra layer")
            check.require(stride >= 1, "strides" + at, stride, "an integer >= 1 for an extra layer")
            check.require(pad >= 0, "pads" + at, pad, "an integer >= 0 for an extra layer")
    smallest = [min(sizes) for sizes in config["sizes"]]
    for i in range(1, len(smallest)):
        check.require(smallest[i] >= smallest[i - 1], "sizes[%d]" % i, config["sizes"][i],
                      "anchor sizes that do not shrink on coarser maps (previous smallest %g)"
                      % smallest[i - 1])


SHAPE_STEP = 32
"""The data shapes a refusal of shrinking maps suggests are multiples of this (the coarsest
backbone stride), up to :data:`LARGEST_SUGGESTED`."""
LARGEST_SUGGESTED = 2048


def shrinking(sizes):
    return all(b < a for a, b in zip(sizes, sizes[1:]))


def smallest_shrinking_shape(spec, backbone, layers):
    """The smallest data shape above ``spec``'s, a multiple of :data:`SHAPE_STEP`, at which
    every feature map is smaller than the one before (a larger input only adds to each
    map); None up to :data:`LARGEST_SUGGESTED`."""
    first = (spec["data_shape"] // SHAPE_STEP + 1) * SHAPE_STEP
    for side in range(first, LARGEST_SUGGESTED + 1, SHAPE_STEP):
        bigger = spec.merged({"data_shape": side})
        if shrinking([shape[2] for shape in feature_shapes(bigger, backbone, layers)]):
            return side
    return None


def check_feature_maps(config, sizes, smallest=None):
    """Feature maps must shrink strictly and anchor steps must tile the image (unless the
    config's ``check_maps`` is false). ``smallest``
    gives the data shape from which the maps shrink (called only to say so when they do
    not here)."""
    check = Checker(config)
    data_shape = config["data_shape"]
    steps = config.get("steps")
    if not config.get("check_maps", True):
        return [-1] * len(sizes) if steps is None else steps
    if not shrinking(sizes):
        i = next(i for i in range(1, len(sizes)) if sizes[i] >= sizes[i - 1])
        side = smallest() if smallest else None
        check.fail("from_layers[%d]" % i, config["from_layers"][i],
                   "a feature map smaller than the previous one (%dx%d), got %dx%d at data "
                   "shape %d: strides must grow strictly%s"
                   % (sizes[i - 1], sizes[i - 1], sizes[i], sizes[i], data_shape,
                      "; data shapes from %d up work (e.g. --data-shape %d)"
                      % (side, side) if side else ""))
    if steps is None:
        return [-1] * len(sizes)
    for i, (step, size) in enumerate(zip(steps, sizes)):
        if step > 0:
            check.require(abs(step * size - data_shape) < step, "steps[%d]" % i, step,
                          "a step that tiles the %dx%d map over the %d-pixel image (about %.1f)"
                          % (size, size, data_shape, data_shape / size))
    return steps


ARCHITECTURE = SSD  # the implementation of arch "ssd"
