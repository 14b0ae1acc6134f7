"""GluonCV's Faster R-CNN detectors as zoo models: the configs that compute what they
compute and the maps of their parameters onto ours.

The maps are exact. GluonCV's RPN scores an anchor with one sigmoid logit ``z``; ours has
a background and an object logit, and the ``"gluoncv"`` convention scores ``sigmoid(object
- background)``, so the background rows are zero and the object rows GluonCV's. GluonCV's
box predictor has no background rows; ours gets zero rows there, which decoding never
reads. GluonCV's anchors are a stored constant: the map checks it against the anchors the
config makes, so that a config that does not equal the network fails at import.
"""
import numpy as np

from zoo.architectures import faster_rcnn as c4
from zoo.architectures import faster_rcnn_fpn as fpn
from symbols.rpn import gluoncv_base_anchors
from symbols.fpn import level_tag
from zoo.gluoncv.common import GluonCVImportError
from zoo.pretrained.maps import param_map

__all__ = ["MOBILENETV2_CUT", "check_anchors", "map_c4", "map_c4_mobilenetv2", "map_fpn"]

C4_TRUNK = {"conv1": "features.0", "bn1": "features.1", "layer1": "features.4",
            "layer2": "features.5", "layer3": "features.6", "layer4": "top_features.0"}
"""Where the C4 detectors keep the ResNet classifier's blocks: the trunk up to ``layer3``
in ``features``, ``layer4`` (the box head) in ``top_features``."""

MOBILENETV2_CUT = 16
"""The child of GluonCV's ``mobilenetv2_1.0`` ``features`` (block 14, whose expansion is our
``c4``) where a C4 detector on it splits: its expansion ends ``features``, its strided rest
starts ``top_features`` (:func:`zoo_bench.parity_gluoncv.split_mobilenetv2`)."""
EXPANSION_LAYERS = 3
"""The children of a GluonCV bottleneck's ``out`` that make its expansion (1x1, BN, ReLU6)."""


def _with_background(array, rows):
    """``array`` after ``rows`` zero rows along axis 0: a predictor with background rows."""
    return np.concatenate([np.zeros((rows,) + array.shape[1:], array.dtype), array])


ANCHOR_TOLERANCE = 1e-3
"""Pixels an imported anchor may differ from ours: GluonCV shifts its anchors in float64 and
rounds once, the graph shifts float32 corners, so fractional scales (fitted anchors) differ
in the last bit (1.5e-5 px at 2048 px); a wrong anchor is pixels off."""


def check_anchors(gluon, name, level, model):
    """Read GluonCV's anchor constant ``name`` ``(1, 1, H, W, 4A)`` and fail unless it holds
    the anchors of ``level`` (an :class:`symbols.rpn.AnchorLevel`) as
    :func:`symbols.rpn.gluoncv_base_anchors` makes them, shifted per cell, within
    :data:`ANCHOR_TOLERANCE` pixels."""
    theirs = gluon[name]
    height, width = theirs.shape[2:4]
    base = gluoncv_base_anchors(level.stride, level.scales, level.ratios)
    cols, rows = np.meshgrid(np.arange(width) * level.stride, np.arange(height) * level.stride)
    shifts = np.stack([cols, rows, cols, rows], axis=-1).astype(np.float32)
    ours = (shifts[:, :, None, :] + base[None, None]).reshape(1, 1, height, width, -1)
    if ours.shape != theirs.shape or np.abs(ours - theirs).max() > ANCHOR_TOLERANCE:
        raise GluonCVImportError(
            "%s: GluonCV's %s are not the anchors of %s (stride %d, scales %s, ratios %s)"
            % (model.name, name, model.name, level.stride, list(level.scales),
               list(level.ratios)))


def map_trunk(gluon, model, place):
    """Our backbone's arrays from GluonCV's, the classifier's block paths moved to where
    the detector keeps them (``place(path)``: the detector's path of the classifier's
    ``path``, None for the classifier's own layers)."""
    mapped = {}
    for ours, theirs in param_map(model.backbone).items():
        path = place(theirs)
        if path is not None:
            mapped[ours] = gluon[path]
    return mapped


def resnet_place(path):
    """The C4 detector's path of a ResNet classifier's ``path`` (:data:`C4_TRUNK`)."""
    block, rest = path.split(".", 1)
    return None if block == "fc" else C4_TRUNK[block] + "." + rest


def mobilenetv2_place(path):
    """The C4 detector's path of a ``mobilenetv2_1.0`` classifier's ``path``
    (``features.16.out.4.gamma``), split at :data:`MOBILENETV2_CUT`; None for its
    ``output``."""
    block, index, rest = (path.split(".", 2) + [""])[:3]
    if block != "features":
        return None
    index = int(index)
    if index < MOBILENETV2_CUT:
        return path
    if index > MOBILENETV2_CUT:
        return "top_features.%d.%s" % (index - MOBILENETV2_CUT, rest)
    layer, rest = rest[len("out."):].split(".", 1)
    if int(layer) < EXPANSION_LAYERS:
        return "features.%d.%s.%s" % (MOBILENETV2_CUT, layer, rest)
    return "top_features.0.%d.%s" % (int(layer) - EXPANSION_LAYERS, rest)


def map_rpn(gluon, head):
    """The RPN head's arrays from GluonCV's block ``head`` (``conv1.0``, ``score``,
    ``loc``)."""
    score_weight = gluon[head + ".score.weight"]
    score_bias = gluon[head + ".score.bias"]
    return {"rpn_conv_3x3_weight": gluon[head + ".conv1.0.weight"],
            "rpn_conv_3x3_bias": gluon[head + ".conv1.0.bias"],
            "rpn_cls_score_weight": _with_background(score_weight, len(score_weight)),
            "rpn_cls_score_bias": _with_background(score_bias, len(score_bias)),
            "rpn_bbox_pred_weight": gluon[head + ".loc.weight"],
            "rpn_bbox_pred_bias": gluon[head + ".loc.bias"]}


def map_predictors(gluon):
    """The class scores as they are; the box deltas with 4 zero background rows."""
    return {"rcnn_cls_score_weight": gluon["class_predictor.weight"],
            "rcnn_cls_score_bias": gluon["class_predictor.bias"],
            "rcnn_bbox_pred_weight": _with_background(gluon["box_predictor.weight"], 4),
            "rcnn_bbox_pred_bias": _with_background(gluon["box_predictor.bias"], 4)}


def map_c4(gluon, model):
    """``{our name: array}`` of a C4 Faster R-CNN from GluonCV's ``faster_rcnn_*`` arrays."""
    check_anchors(gluon, "rpn.anchor_generator.anchors", c4.rpn(model.spec, "test").anchors,
                  model)
    return dict(map_trunk(gluon, model, resnet_place), **map_rpn(gluon, "rpn"),
                **map_predictors(gluon))


def map_c4_mobilenetv2(gluon, model):
    """``{our name: array}`` of a C4 Faster R-CNN on MobileNetV2
    (``faster_rcnn_mobilenetv2_gluoncv``) from GluonCV's ``FasterRCNN`` on
    ``mobilenetv2_1.0`` split at :data:`MOBILENETV2_CUT` (GluonCV publishes none)."""
    check_anchors(gluon, "rpn.anchor_generator.anchors", c4.rpn(model.spec, "test").anchors,
                  model)
    return dict(map_trunk(gluon, model, mobilenetv2_place), **map_rpn(gluon, "rpn"),
                **map_predictors(gluon))


def fpn_trunk_name(path):
    """GluonCV's name in an FPN detector (``features.resnetv1b_layers1_conv3_weight``, the
    ResNet-50 v1b trunk as a symbol) of the classifier's block path ``path``
    (``layer1.1.conv1.weight``): stem ``conv0``/``batchnorm0``, each stage's convolutions and
    batch norms numbered through its units (three per unit), projections ``down{s}``."""
    parts = path.split(".")
    if parts[0] in ("conv1", "bn1"):
        layer = "conv0" if parts[0] == "conv1" else "batchnorm0"
    elif parts[2] == "downsample":
        layer = "down%s_%s0" % (parts[0][len("layer"):],
                                "conv" if parts[3] == "0" else "batchnorm")
    else:
        kind, number = parts[2][:-1], int(parts[2][-1])
        layer = "layers%s_%s%d" % (parts[0][len("layer"):],
                                   "conv" if kind == "conv" else "batchnorm",
                                   3 * int(parts[1]) + number - 1)
    return "features.resnetv1b_%s_%s" % (layer, parts[-1])


def map_fpn(gluon, model):
    """``{our name: array}`` of an FPN Faster R-CNN from GluonCV's ``faster_rcnn_fpn_*``
    arrays."""
    spec = model.spec
    mapped = {ours: gluon[fpn_trunk_name(theirs)]
              for ours, theirs in param_map(model.backbone).items()
              if not theirs.startswith("fc.")}
    for kind in ("weight", "bias"):
        for stride in spec["fpn_strides"]:
            tag = level_tag(stride)
            theirs = "features.P%s" % tag[1:]
            mapped["fpn_lateral_%s_%s" % (tag, kind)] = gluon["%s_conv_lat_%s" % (theirs, kind)]
            mapped["fpn_output_%s_%s" % (tag, kind)] = gluon["%s_conv1_%s" % (theirs, kind)]
        extra = level_tag(2 * spec["fpn_strides"][-1])  # GluonCV's P6, from the P5 lateral
        mapped["fpn_subsample_%s_%s" % (extra, kind)] = gluon["features.P%s_conv1_%s"
                                                             % (extra[1:], kind)]
    for index, level in enumerate(fpn.anchors(spec)):
        check_anchors(gluon, "rpn.anchor_generator.%d.anchors" % index, level, model)
    for ours, theirs in (("head_fc6", "box_features.0"), ("head_fc7", "box_features.2")):
        for kind in ("weight", "bias"):
            mapped["%s_%s" % (ours, kind)] = gluon["%s.%s" % (theirs, kind)]
    return dict(mapped, **map_rpn(gluon, "rpn.rpn_head"), **map_predictors(gluon))
