"""SSD configs: defaults, validation against the backbone graph, input shapes, losses."""
import types

import mxnet as mx
import numpy as np

from ..modeling import ssd as symbols

from ..graph import effective_stride
from ..metrics.arrays import to_numpy
from ..validate import Checker, check_backbone_layer, is_int, is_number
from .base import COMMON_DEFAULTS, Architecture

DEFAULTS = types.MappingProxyType(dict(
    COMMON_DEFAULTS,
    data_shape=512,
    steps=None,
    extra_use_bn=True,
    overlap_threshold=0.5,
    negative_mining_ratio=3.0,
    negative_mining_thresh=0.5,
    variances=[0.1, 0.1, 0.2, 0.2],
    nms_threshold=0.45,
    nms_topk=400,
    force_suppress=False,
))
REQUIRED = ("backbone", "from_layers", "num_filters", "strides", "pads", "normalizations",
            "sizes", "ratios")
PER_FEATURE_FIELDS = ("from_layers", "num_filters", "strides", "pads", "sizes", "ratios",
                      "normalizations")
MAX_ANCHOR_SIZE = 1.2
LOSS_NAMES = ("cls_loss", "box_loss")


class SSD(Architecture):
    """Single-shot detection on backbone layers plus extra blocks. Derived fields:
    ``feature_layers`` (layer names), ``feature_channels`` and ``steps`` (-1 where the
    config derives them from the map size)."""

    name = "ssd"
    defaults = DEFAULTS
    required = REQUIRED
    loss_names = LOSS_NAMES
    output_names = symbols.TRAINING_OUTPUTS

    def derive(self, spec, backbone, graph):
        check_fields(spec)
        check = Checker(spec)
        layers = [check_backbone_layer(check, backbone, graph, "from_layers[%d]" % i, name)
                  if name else "" for i, name in enumerate(spec["from_layers"])]
        shapes = feature_shapes(spec, backbone, layers)
        return {"feature_layers": layers,
                "feature_channels": [shape[1] for shape in shapes],
                "steps": check_feature_maps(spec, [shape[2] for shape in shapes])}

    def input_shapes(self, spec, batch_size=1):
        side = spec["data_shape"]
        return {"data": (batch_size, 3, side, side)}

    def inference_symbol(self, backbone, spec):
        return symbols.inference_symbol(backbone, feature_maps(spec), anchor_boxes(spec),
                                        spec["num_classes"], decoding(spec))

    def training_symbol(self, backbone, spec):
        return symbols.training_symbol(backbone, feature_maps(spec), anchor_boxes(spec),
                                       spec["num_classes"], decoding(spec), matching(spec))

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
        normalizations=tuple(spec["normalizations"]), channels=tuple(spec["feature_channels"]))


def anchor_boxes(spec):
    side = spec["data_shape"]
    return symbols.AnchorBoxes(
        sizes=tuple(map(tuple, spec["sizes"])), ratios=tuple(map(tuple, spec["ratios"])),
        steps=tuple(step / side if step > 0 else -1.0 for step in spec["steps"]))


def decoding(spec):
    return symbols.Decoding(variances=tuple(spec["variances"]),
                            nms_threshold=spec["nms_threshold"], nms_topk=spec["nms_topk"],
                            force_suppress=spec["force_suppress"])


def matching(spec):
    return symbols.Matching(overlap_threshold=spec["overlap_threshold"],
                            negative_mining_ratio=spec["negative_mining_ratio"],
                            negative_mining_thresh=spec["negative_mining_thresh"])


def feature_shapes(spec, backbone, layers):
    """``(1, C, H, W)`` of every map the heads see, the backbone taps being ``layers``."""
    features = symbols.multi_scale_features(
        backbone.body(), layers, spec["num_filters"], spec["strides"], spec["pads"],
        spec["extra_use_bn"])
    side = spec["data_shape"]
    _, out_shapes, _ = mx.sym.Group(features).infer_shape(data=(1, 3, side, side))
    return [tuple(shape) for shape in out_shapes]


def check_fields(config):
    """Types, list lengths and value ranges; independent of the graph."""
    check = Checker(config)
    num_classes = config["num_classes"]
    check.require(is_int(num_classes) and num_classes >= 1, "num_classes", num_classes,
                  "a positive integer")
    names = config.get("class_names")
    check.require(names is None or (isinstance(names, list) and len(names) == num_classes),
                  "class_names", names, "null or a list of num_classes=%s names" % num_classes)
    for field in PER_FEATURE_FIELDS:
        check.require(isinstance(config[field], list) and config[field], field, config[field],
                      "a non-empty list with one entry per feature map")
    count = len(config["from_layers"])
    fields = PER_FEATURE_FIELDS + (("steps",) if config.get("steps") is not None else ())
    for field in fields:
        check.require(isinstance(config[field], list) and len(config[field]) == count, field,
                      config[field], "%d entries, one per from_layers entry" % count)
    check.require(isinstance(config["from_layers"][0], str) and config["from_layers"][0],
                  "from_layers[0]", config["from_layers"][0],
                  "a backbone layer: extra layers need a feature map to start from")
    for i, layer in enumerate(config["from_layers"]):
        at = "[%d]" % i
        check.require(isinstance(layer, str), "from_layers" + at, layer,
                      "a backbone layer name or '' for an extra layer")
        filters, stride, pad = (config[f][i] for f in ("num_filters", "strides", "pads"))
        if layer:
            check.require(is_int(filters) and (filters == -1 or filters > 0), "num_filters" + at,
                          filters, "-1 (use the backbone layer as is) or a positive width")
            check.require(stride == -1, "strides" + at, stride, "-1 for a backbone layer")
            check.require(pad == -1, "pads" + at, pad, "-1 for a backbone layer")
        else:
            check.require(is_int(filters) and filters >= 2, "num_filters" + at, filters,
                          "an integer >= 2 for an extra layer")
            check.require(is_int(stride) and stride >= 1, "strides" + at, stride,
                          "an integer >= 1 for an extra layer")
            check.require(is_int(pad) and pad >= 0, "pads" + at, pad,
                          "an integer >= 0 for an extra layer")
        norm = config["normalizations"][i]
        check.require(is_number(norm) and (norm == -1 or norm > 0), "normalizations" + at, norm,
                      "-1 (none) or a positive initial L2-norm scale")
        _check_anchor_shapes(check, config["sizes"][i], config["ratios"][i], at)
        if config.get("steps") is not None:
            step = config["steps"][i]
            check.require(is_number(step) and (step == -1 or step > 0), "steps" + at, step,
                          "-1 (derive from the feature size) or a positive step in pixels")
    smallest = [min(sizes) for sizes in config["sizes"]]
    for i in range(1, count):
        check.require(smallest[i] >= smallest[i - 1], "sizes[%d]" % i, config["sizes"][i],
                      "anchor sizes that do not shrink on coarser maps (previous smallest %g)"
                      % smallest[i - 1])


def _check_anchor_shapes(check, sizes, ratios, at):
    check.require(isinstance(sizes, list) and sizes and all(
        is_number(s) and 0 < s <= MAX_ANCHOR_SIZE for s in sizes), "sizes" + at, sizes,
        "a non-empty list of sizes in (0, %g], as fractions of the image side" % MAX_ANCHOR_SIZE)
    check.require(isinstance(ratios, list) and ratios and all(
        is_number(r) and 0.05 <= r <= 20 for r in ratios), "ratios" + at, ratios,
        "a non-empty list of aspect ratios in [0.05, 20]")
    check.require(len(set(ratios)) == len(ratios), "ratios" + at, ratios, "no repeated ratio")


def check_feature_maps(config, sizes):
    """Feature maps must shrink strictly and anchor steps must tile the image."""
    check = Checker(config)
    data_shape = config["data_shape"]
    for i in range(1, len(sizes)):
        check.require(sizes[i] < sizes[i - 1], "from_layers[%d]" % i, config["from_layers"][i],
                      "a feature map smaller than the previous one (%dx%d), got %dx%d at data "
                      "shape %d: strides must grow strictly"
                      % (sizes[i - 1], sizes[i - 1], sizes[i], sizes[i], data_shape))
    steps = config.get("steps")
    if steps is None:
        return [-1] * len(sizes)
    for i, (step, size) in enumerate(zip(steps, sizes)):
        if step > 0:
            check.require(abs(step * size - data_shape) < step, "steps[%d]" % i, step,
                          "a step that tiles the %dx%d map over the %d-pixel image (about %.1f)"
                          % (size, size, data_shape, data_shape / size))
    return steps
