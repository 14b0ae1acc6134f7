"""GluonCV's SSDs on ResNet-50 v1 (``ssd_512_resnet50_v1_voc`` and ``_coco``) and on MobileNet
v1 (``ssd_512_mobilenet1.0_*``, ``ssd_300_mobilenet0.25_*``) as zoo models.

GluonCV builds the backbone and the extra blocks as one symbol (its ``FeatureExpander``), so
their parameters are named by the symbol's layers (``features.resnetv10_stage2_conv4_weight``,
``features.mobilenet0_conv3_weight``, ``features.expand_trans_conv0_weight``); the heads by
block path (``class_predictors.0.predictor.weight``). Its anchors are stored too
(``anchor_generators.0.anchors``): the map reads them to check that they are the zoo model's,
so a file trained with other anchors is refused rather than decoded wrongly.

:func:`overrides_for` reads the config fields of any SSD GluonCV's ``get_ssd`` builds on these
backbones off the network, so that one of another size or other anchors imports as well.
"""
import mxnet as mx
import numpy as np

from zoo.architectures import ssd as ssd_config
from symbols import ssd as ssd_symbols
from symbols.backbones import mobilenet, mobilenetv2
from zoo.pretrained.maps import GLUON_BN_PARAMS
from zoo.gluoncv.common import GluonCVImportError

__all__ = ["GLUONCV_TAPS", "map_ssd_mobilenet", "map_ssd_mobilenetv2", "map_ssd_resnet_v1",
           "overrides_for"]

BACKBONE = "features.resnetv10_"
"""The prefix of GluonCV's ResNet v1 names inside its SSDs (a fresh process's block name)."""
MOBILENET = "features.mobilenet0_"
"""The prefix of GluonCV's MobileNet v1 names inside its SSDs (both widths)."""

MOBILENETV2 = "features.mobilenetv20_features_"
"""The prefix of GluonCV's MobileNetV2 (``mobilenetv2_1.0``) names inside an SSD."""

GLUONCV_TAPS = {"stage3_activation5": "res4", "stage4_activation2": "res5",
                "relu22_fwd": "c4", "relu26_fwd": "c5",
                "features_linearbottleneck3_relu60_relu6": "c2",
                "features_linearbottleneck6_relu60_relu6": "c3",
                "features_linearbottleneck13_relu60_relu6": "c4",
                "features_relu61_relu6": "c5"}
"""GluonCV's names of the backbone layers its SSDs tap (``get_ssd``'s ``features``) to our
stages: ResNet-50 v1's, MobileNet v1's and MobileNetV2's (each stage the expansion of the next
stage's first block, as :mod:`symbols.backbones.mobilenetv2` ends them)."""

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


def _mobilenet(mapped, gluon):
    """GluonCV's MobileNet v1 inside its SSD numbers its convolutions and batch norms in
    order: 0 the stem, ``2i - 1`` block ``i``'s depthwise, ``2i`` its pointwise."""
    _conv_bn(mapped, gluon, "conv1", MOBILENET + "conv0", MOBILENET + "batchnorm0")
    for block in range(1, len(mobilenet.BLOCKS) + 1):
        for index, layer in ((2 * block - 1, "dwise"), (2 * block, "pwise")):
            _conv_bn(mapped, gluon, "block%d_%s" % (block, layer), "%sconv%d" % (MOBILENET, index),
                     "%sbatchnorm%d" % (MOBILENET, index))


def _mobilenetv2(mapped, gluon):
    """GluonCV's MobileNetV2 inside its SSD: the stem ``conv0``, block ``i`` as
    ``linearbottleneck{i-1}`` numbering its expansion (absent where the block does not
    expand), depthwise and projection ``conv``/``batchnorm`` 0, 1, 2, and the last 1x1
    ``conv1``. An SSD keeps the layers up to its deepest tap: only those GluonCV's network
    holds are mapped (the import checks that every array of ours is filled)."""
    _conv_bn(mapped, gluon, "conv1", MOBILENETV2 + "conv0", MOBILENETV2 + "batchnorm0")
    for block in range(1, len(mobilenetv2.BLOCKS)):
        layers = (["dwise", "project"] if mobilenetv2.BLOCKS[block][2] == 1
                  else ["expand", "dwise", "project"])
        theirs = "%slinearbottleneck%d_" % (MOBILENETV2, block - 1)
        for index, layer in enumerate(layers):
            if "%sconv%d_weight" % (theirs, index) in gluon:
                _conv_bn(mapped, gluon, "block%d_%s" % (block, layer),
                         "%sconv%d" % (theirs, index), "%sbatchnorm%d" % (theirs, index))
    if MOBILENETV2 + "conv1_weight" in gluon:
        _conv_bn(mapped, gluon, "conv_last", MOBILENETV2 + "conv1", MOBILENETV2 + "batchnorm1")


def _extras(mapped, gluon, count, first=None):
    """GluonCV's extra blocks, numbered from 0, onto ours, numbered by their map (``first``,
    the number of backbone taps: :data:`FIRST_EXTRA_MAP` for ResNet's and MobileNet v1's)."""
    first = FIRST_EXTRA_MAP if first is None else first
    for extra in range(count):
        ours = "extra%d" % (extra + first)
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


def map_ssd_mobilenet(gluon, model):
    """Our arrays of ``model`` (the ``ssd_mobilenet{1.0,0.25}_gluoncv_*`` configs) from
    GluonCV's ``ssd_512_mobilenet1.0_*`` / ``ssd_300_mobilenet0.25_*`` arrays ``gluon``, its
    anchors checked against ours."""
    spec = model.spec
    mapped = {}
    _mobilenet(mapped, gluon)
    _extras(mapped, gluon, sum(1 for layer in spec["from_layers"] if not layer))
    _heads(mapped, gluon, len(spec["from_layers"]))
    _check_anchors(gluon, model, spec["name"])
    return mapped


def map_ssd_mobilenetv2(gluon, model):
    """Our arrays of ``model`` (``ssd_mobilenetv2_stride8_gluoncv`` and its overrides) from a
    GluonCV SSD that ``get_ssd`` built on ``mobilenetv2_1.0`` (GluonCV publishes none), its
    anchors checked against ours."""
    spec = model.spec
    mapped = {}
    _mobilenetv2(mapped, gluon)
    _extras(mapped, gluon, sum(1 for layer in spec["from_layers"] if not layer),
            first=sum(1 for layer in spec["from_layers"] if layer))
    _heads(mapped, gluon, len(spec["from_layers"]))
    _check_anchors(gluon, model, spec["name"])
    return mapped


def overrides_for(net, side):
    """The config fields (keywords of ``zoo.get_model``, ``import_net``'s ``overrides``) that
    make an importer's config compute what ``net`` computes at ``side`` x ``side`` pixels:
    ``net`` a GluonCV SSD built by ``gluoncv.model_zoo.ssd.ssd.get_ssd`` on a backbone of
    :data:`GLUONCV_TAPS` (any taps, extra blocks, anchor sizes, ratios and steps), initialised
    (its anchors are read). Returns ``data_shape``, ``from_layers``, ``num_filters``,
    ``strides``, ``pads``, ``normalizations``, ``sizes`` (fractions of ``side``), ``ratios``,
    ``steps`` (pixels), ``nms_threshold``, ``nms_topk`` and ``check_maps`` (false where the
    maps do not shrink or the steps do not tile them, as GluonCV allows). Raises
    :class:`GluonCVImportError` for what the zoo cannot express: a tap not in
    :data:`GLUONCV_TAPS`, or an extra block whose 1x1 is not as wide as its 3x3 (``get_ssd``'s
    ``reduce_ratio`` or ``min_depth`` at work)."""
    features = net.features._cached_graph[1]
    arg_shapes, out_shapes, _ = features.infer_shape(data=(1, 3, side, side))
    weights = dict(zip(features.list_arguments(), arg_shapes))
    from_layers, num_filters = [], []
    for output, shape in zip(features.list_outputs(), out_shapes):
        layer = output[:-len("_output")]
        extra = layer.rsplit("expand_relu", 1)
        if len(extra) == 2 and extra[1].isdigit():
            trans = [shape_[0] for name, shape_ in weights.items()
                     if name.endswith("expand_trans_conv%s_weight" % extra[1])]
            if trans != [shape[1]]:
                raise GluonCVImportError("%s: extra block %s's 1x1 is %s wide, its 3x3 %d: the "
                                         "zoo's gluoncv extra blocks have both as wide"
                                         % (net.name, extra[1], trans, shape[1]))
            from_layers.append("")
            num_filters.append(int(shape[1]))
            continue
        stage = [ours for theirs, ours in GLUONCV_TAPS.items() if layer.endswith("_" + theirs)]
        if not stage:
            raise GluonCVImportError("%s taps %s, which the zoo knows no stage of (known: %s)"
                                     % (net.name, layer, ", ".join(sorted(GLUONCV_TAPS))))
        from_layers.append(stage[0])
        num_filters.append(-1)
    sizes, ratios, steps = [], [], []
    for generator in net.anchor_generators:
        sizes.append([float(size) / side for size in generator._sizes])
        ratios.append([float(ratio) for ratio in generator._ratios])
        # GluonCV's anchor centres are (cell + 0.5) * step: the first one's is half a step
        steps.append(float(generator.anchors.data().asnumpy()[0, 0, 0, 0, 0]) * 2)
    maps = [shape[2] for shape in out_shapes]
    tiled = all(abs(step * size - side) < step for step, size in zip(steps, maps))
    return dict(data_shape=side, from_layers=from_layers, num_filters=num_filters,
                # GluonCV's extra blocks: 3x3, stride 2, padding 1
                strides=[-1 if layer else 2 for layer in from_layers],
                pads=[-1 if layer else 1 for layer in from_layers],
                normalizations=[-1] * len(from_layers), sizes=sizes, ratios=ratios,
                steps=steps, nms_threshold=net.nms_thresh, nms_topk=net.nms_topk,
                check_maps=bool(ssd_config.shrinking(maps) and tiled))
