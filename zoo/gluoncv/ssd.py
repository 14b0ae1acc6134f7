"""GluonCV's SSDs on ResNet-50 v1 (``ssd_512_resnet50_v1_voc`` and ``_coco``) as zoo models.

GluonCV builds the backbone and the extra blocks as one symbol (its ``FeatureExpander``), so
their parameters are named by the symbol's layers (``features.resnetv10_stage2_conv4_weight``,
``features.expand_trans_conv0_weight``); the heads by block path
(``class_predictors.0.predictor.weight``). Its anchors are stored too
(``anchor_generators.0.anchors``): the map reads them to check that they are the zoo model's,
so a file trained with other anchors is refused rather than decoded wrongly.
"""
import mxnet as mx
import numpy as np

from zoo.architectures import ssd as ssd_config
from symbols import ssd as ssd_symbols
from zoo.pretrained.maps import GLUON_BN_PARAMS
from zoo.gluoncv.common import GluonCVImportError

__all__ = ["map_ssd_resnet_v1"]

BACKBONE = "features.resnetv10_"
"""The prefix of GluonCV's ResNet v1 names inside its SSDs (a fresh process's block name)."""

ANCHOR_TOLERANCE = 1e-3
"""Pixels by which GluonCV's stored anchors may differ from ours (float32 rounding)."""

FIRST_EXTRA_MAP = 2
"""The maps before it are backbone taps (res4, res5); GluonCV numbers its extras from 0."""

SYMBOL_BN_PARAMS = tuple((ours, ours) for ours, _ in GLUON_BN_PARAMS)
"""Our batch-norm suffixes and those of a symbol's batch norm (GluonCV's extras), the same;
a Gluon block's (the backbone's) say ``running_`` (:data:`GLUON_BN_PARAMS`)."""


def _conv_bn(mapped, gluon, ours, conv, bn, bias=False, bn_params=GLUON_BN_PARAMS):
    """Map GluonCV's convolution ``conv`` and batch norm ``bn`` onto our ``ours`` and
    ``ours_bn``."""
    mapped[ours + "_weight"] = gluon[conv + "_weight"]
    if bias:
        mapped[ours + "_bias"] = gluon[conv + "_bias"]
    for our_suffix, gluon_suffix in bn_params:
        mapped["%s_bn_%s" % (ours, our_suffix)] = gluon["%s_%s" % (bn, gluon_suffix)]


def _unit_layer(unit, layer):
    """GluonCV's index of layer ``layer`` (0-2; 3: the projection) of unit ``unit`` (from 1)
    in its stage: unit 1 numbers its three layers and projection 0-3, the next units 4-6,
    7-9, ..."""
    return layer if unit == 1 else 4 + 3 * (unit - 2) + layer


def _backbone(mapped, gluon, backbone):
    _conv_bn(mapped, gluon, "conv1", BACKBONE + "conv0", BACKBONE + "batchnorm0")
    for stage, units in enumerate(backbone.blocks, start=1):
        theirs = "%sstage%d_" % (BACKBONE, stage)
        for unit in range(1, units + 1):
            ours = backbone.unit_name(stage, unit)
            for layer in range(3):
                index = _unit_layer(unit, layer)
                _conv_bn(mapped, gluon, "%s_conv%d" % (ours, layer + 1),
                         "%sconv%d" % (theirs, index), "%sbatchnorm%d" % (theirs, index),
                         bias=layer != 1)
            if unit == 1:
                index = _unit_layer(unit, 3)
                _conv_bn(mapped, gluon, ours + "_downsample", "%sconv%d" % (theirs, index),
                         "%sbatchnorm%d" % (theirs, index))


def _extras(mapped, gluon, count):
    for extra in range(count):
        ours = "extra%d" % (extra + FIRST_EXTRA_MAP)
        _conv_bn(mapped, gluon, ours + "_conv1", "features.expand_trans_conv%d" % extra,
                 "features.expand_trans_bn%d" % extra, bn_params=SYMBOL_BN_PARAMS)
        _conv_bn(mapped, gluon, ours + "_conv2", "features.expand_conv%d" % extra,
                 "features.expand_bn%d" % extra, bn_params=SYMBOL_BN_PARAMS)


def _heads(mapped, gluon, count):
    for head in range(count):
        for ours, theirs in (("cls", "class_predictors"), ("loc", "box_predictors")):
            for kind in ("weight", "bias"):
                mapped["head%d_%s_%s" % (head, ours, kind)] = gluon[
                    "%s.%d.predictor.%s" % (theirs, head, kind)]


def our_anchors(model, shapes):
    """Our anchors per feature map (of ``shapes``, ``(1, C, H, W)`` each), ``(H * W * A, 4)``
    corners in pixels of the input."""
    spec = model.spec
    maps = [mx.sym.Variable("map%d" % i) for i in range(len(shapes))]
    boxes = ssd_config.anchor_boxes(spec)
    side = spec["data_shape"]
    anchors = []
    for i, (feature, shape) in enumerate(zip(maps, shapes)):
        prior = ssd_symbols.anchors([feature], boxes.sizes[i:i + 1], boxes.ratios[i:i + 1],
                                    boxes.steps[i:i + 1])
        value = prior.eval(ctx=mx.cpu(), **{"map%d" % i: mx.nd.zeros(shape)})[0]
        anchors.append(value.asnumpy()[0] * side)
    return anchors


def gluon_anchors(stored, height, width):
    """GluonCV's stored anchors ``(1, 1, rows, cols, A * 4)`` (centre, size in pixels) of an
    ``height x width`` map, as ``(H * W * A, 4)`` corners."""
    centre = stored[0, 0, :height, :width].reshape(-1, 4)
    half = centre[:, 2:] / 2
    return np.concatenate([centre[:, :2] - half, centre[:, :2] + half], axis=1)


def _check_anchors(gluon, model, gluoncv_name):
    shapes = ssd_config.feature_shapes(model.spec, model.backbone, model.spec["feature_layers"])
    for i, (ours, shape) in enumerate(zip(our_anchors(model, shapes), shapes)):
        name = "anchor_generators.%d.anchors" % i
        theirs = gluon_anchors(gluon[name], shape[2], shape[3])
        if theirs.shape != ours.shape:
            raise GluonCVImportError("%s: %s give %s anchors on map %d, %s's anchors %s" % (
                gluoncv_name, name, theirs.shape, i, model.name, ours.shape))
        differ = float(np.abs(theirs - ours).max())
        if differ > ANCHOR_TOLERANCE:
            raise GluonCVImportError("%s: %s differ from %s's anchors of map %d by up to %.3g "
                                     "pixels" % (gluoncv_name, name, model.name, i, differ))


def map_ssd_resnet_v1(gluon, model):
    """Our arrays of ``model`` (the ``ssd_resnet50_v1_gluoncv_*`` configs) from GluonCV's
    ``ssd_512_resnet50_v1_*`` arrays ``gluon``, its anchors checked against ours."""
    spec = model.spec
    mapped = {}
    _backbone(mapped, gluon, model.backbone)
    _extras(mapped, gluon, sum(1 for layer in spec["from_layers"] if not layer))
    _heads(mapped, gluon, len(spec["from_layers"]))
    _check_anchors(gluon, model, spec["name"])
    return mapped
