"""ResNet-50/101 in the v1b layout (the stride sits on the 3x3 convolution), and ResNet-50
in GluonCV's v1 layout (the stride sits on the first 1x1 convolution, and both 1x1
convolutions of a unit have a bias), the backbone of GluonCV's ``ssd_512_resnet50_v1_*``.

Layer names: ``conv1``, ``stage{s}_unit{u}_conv{1,2,3}`` with ``_bn``/``_relu``
suffixes, ``stage{s}_unit1_downsample``, the unit's sum ``stage{s}_unit{u}_add``
and its output ``stage{s}_unit{u}_relu``. Stages are numbered 1-4 as
``res2``-``res5``.
"""

import functools

from symbols.backbones.base import Backbone, StageSpec
from symbols.backbones.registry import GluonCVBackbone, map_conv_bn, register_backbone
from symbols.layers import add, batchnorm, conv, conv_bn, pool, relu

__all__ = ["BLOCKS", "ResNetV1", "ResNetV1b"]

BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}
WIDTHS = (64, 128, 256, 512)
EXPANSION = 4


class ResNetV1b(Backbone):
    classifier_size = 224

    def __init__(self, depth):
        if depth not in BLOCKS:
            raise ValueError("ResNet depth must be one of %s, got %r" % (sorted(BLOCKS), depth))
        self.depth = depth
        self.blocks = BLOCKS[depth]
        self.name = "resnet%d" % depth

    def stages(self):
        return [StageSpec("res%d" % (s + 2), self.unit_name(s + 1, n) + "_relu",
                          stride=4 * 2 ** s, channels=WIDTHS[s] * EXPANSION)
                for s, n in enumerate(self.blocks)]

    @staticmethod
    def unit_name(stage, unit):
        return "stage%d_unit%d" % (stage, unit)

    def bottleneck(self, data, name, width, stride, downsample):
        """One bottleneck unit: 1x1, 3x3 (strided), 1x1 and the identity or projection."""
        out = conv_bn(data, name + "_conv1", width, kernel=1)
        out = conv_bn(out, name + "_conv2", width, kernel=3, stride=stride)
        out = conv_bn(out, name + "_conv3", width * EXPANSION, kernel=1, act=None)
        return self.residual_sum(out, data, name, width, stride, downsample)

    @staticmethod
    def residual_sum(out, data, name, width, stride, downsample):
        """A unit's output: ReLU of ``out`` plus the unit input ``data``, projected (a 1x1
        of stride ``stride``) where the unit ``downsample``-s."""
        shortcut = data if not downsample else conv_bn(
            data, name + "_downsample", width * EXPANSION, kernel=1, stride=stride, act=None)
        return relu(add(out, shortcut, name + "_add"), name + "_relu")

    def stage(self, data, stage):
        """All units of ``stage`` (1-4); the first one strides (except in stage 1)."""
        stride = 1 if stage == 1 else 2
        for unit in range(1, self.blocks[stage - 1] + 1):
            data = self.bottleneck(data, self.unit_name(stage, unit), WIDTHS[stage - 1],
                                   stride if unit == 1 else 1, downsample=unit == 1)
        return data

    def build_stage(self, data, stage_name):
        """The units of stage ``stage_name`` (``res2``-``res5``) on any input, e.g. ROI features."""
        names = [spec.name for spec in self.stages()]
        if stage_name not in names:
            raise KeyError("%s has no stage %r; stages: %s" % (self.name, stage_name, names))
        return self.stage(data, names.index(stage_name) + 1)

    def stem(self, data):
        out = conv(data, "conv1", 64, kernel=7, stride=2, pad=3)
        out = relu(batchnorm(out, "conv1_bn"), "conv1_relu")
        return pool(out, "pool1", kind="max", kernel=3, stride=2, pad=1)

    def _body(self, data):
        out = self.stem(data)
        for stage in range(1, 5):
            out = self.stage(out, stage)
        return out



class ResNetV1(ResNetV1b):
    """GluonCV's ResNet v1 (``resnet50_v1``): as v1b but the stride on each stage's first
    1x1 convolution, and a bias on both 1x1 convolutions of every unit (``_conv1_bias``,
    ``_conv3_bias``)."""

    def __init__(self, depth):
        super().__init__(depth)
        self.name = "resnet%d_v1" % depth

    def bottleneck(self, data, name, width, stride, downsample):
        """One bottleneck unit: 1x1 (strided, biased), 3x3, 1x1 (biased) and the identity
        or projection."""
        out = _conv_bias_bn(data, name + "_conv1", width, stride, act=True)
        out = conv_bn(out, name + "_conv2", width, kernel=3)
        out = _conv_bias_bn(out, name + "_conv3", width * EXPANSION, 1, act=False)
        return self.residual_sum(out, data, name, width, stride, downsample)



def _conv_bias_bn(data, name, channels, stride, act):
    """A biased 1x1 convolution, batch norm and, if ``act``, ReLU (GluonCV's v1 1x1s)."""
    out = conv(data, name, channels, kernel=1, stride=stride, bias=True)
    out = batchnorm(out, name + "_bn")
    return relu(out, name + "_relu") if act else out


def gluoncv_v1b_names(backbone):
    """Our names to those of GluonCV's ``resnet{50,101}_v1b`` classifier files: ``layer{1..4}``
    the stages, ``fc`` the classifier."""
    mapping = {}
    conv_and_bn = functools.partial(map_conv_bn, mapping)
    conv_and_bn("conv1", "conv1", "bn1")
    for stage, count in enumerate(backbone.blocks, start=1):
        for unit in range(1, count + 1):
            ours = backbone.unit_name(stage, unit)
            theirs = "layer%d.%d" % (stage, unit - 1)
            for i in (1, 2, 3):
                conv_and_bn("%s_conv%d" % (ours, i), "%s.conv%d" % (theirs, i),
                            "%s.bn%d" % (theirs, i))
            if unit == 1:
                conv_and_bn(ours + "_downsample", theirs + ".downsample.0",
                            theirs + ".downsample.1")
    mapping["fc_weight"] = "fc.weight"
    mapping["fc_bias"] = "fc.bias"
    return mapping


def gluoncv_v1_names(backbone):
    """Our names to those of GluonCV's ``resnet50_v1`` classifier file: ``features.0``
    and ``.1`` the stem, ``features.{4..7}`` the stages, ``output`` the classifier."""
    mapping = {}
    conv_and_bn = functools.partial(map_conv_bn, mapping)
    conv_and_bn("conv1", "features.0", "features.1")
    for stage, count in enumerate(backbone.blocks, start=1):
        for unit in range(1, count + 1):
            ours = backbone.unit_name(stage, unit)
            theirs = "features.%d.%d" % (stage + 3, unit - 1)
            for i, (conv_at, bn_at) in enumerate(((0, 1), (3, 4), (6, 7)), start=1):
                conv_and_bn("%s_conv%d" % (ours, i), "%s.body.%d" % (theirs, conv_at),
                            "%s.body.%d" % (theirs, bn_at))
            for i, conv_at in ((1, 0), (3, 6)):
                mapping["%s_conv%d_bias" % (ours, i)] = "%s.body.%d.bias" % (theirs, conv_at)
            if unit == 1:
                conv_and_bn(ours + "_downsample", theirs + ".downsample.0",
                            theirs + ".downsample.1")
    mapping["fc_weight"] = "output.weight"
    mapping["fc_bias"] = "output.bias"
    return mapping


# SSD's heads start with larger class scores and box offsets on a ResNet than on the other
# backbones: healthy first losses measured 3.10x-7.38x the trivial one (zoo.engine.health.loss).
SSD_ON_RESNET = {"ssd": 10.0}

register_backbone("resnet50", functools.partial(ResNetV1b, 50), published_params=25_557_032,
                  gluoncv=GluonCVBackbone("resnet50_v1b", gluoncv_v1b_names),
                  initial_loss_limits=SSD_ON_RESNET)
register_backbone("resnet101", functools.partial(ResNetV1b, 101), published_params=44_549_160,
                  gluoncv=GluonCVBackbone("resnet101_v1b", gluoncv_v1b_names),
                  initial_loss_limits=SSD_ON_RESNET)
# GluonCV's count of resnet50_v1: its 1x1 convolutions have biases.
register_backbone("resnet50_v1", functools.partial(ResNetV1, 50), published_params=25_575_912,
                  gluoncv=GluonCVBackbone("resnet50_v1", gluoncv_v1_names),
                  initial_loss_limits=SSD_ON_RESNET)
