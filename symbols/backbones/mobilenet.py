"""MobileNet v1 (Howard et al. 2017) at width multipliers 1.0 and 0.25, in GluonCV's
``mobilenet1.0`` and ``mobilenet0.25`` layout, the backbones of GluonCV's
``ssd_512_mobilenet1.0_*`` and ``ssd_300_mobilenet0.25_*``.

Layer names: the stem ``conv1`` (3x3, stride 2); the 13 depthwise-separable blocks, numbered
1-13, as ``block{i}_dwise`` (depthwise 3x3, the block's stride) and ``block{i}_pwise``
(pointwise 1x1). ``conv_bn`` adds ``_bn`` and ``_relu``. Every width is the paper's times the
multiplier, rounded down as GluonCV rounds it. The classifier is GluonCV's: global pooling,
flatten and a fully connected ``fc`` with bias.

Each stage ends at the last pointwise convolution at its resolution: ``c4`` at block 11's
(GluonCV's ``relu22_fwd``, the stride-16 map its SSDs tap) and ``c5`` at block 13's
(``relu26_fwd``, stride 32).
"""

import functools

from symbols.backbones.base import Backbone, StageSpec
from symbols.backbones.registry import GluonCVBackbone, map_conv_bn, register_backbone
from symbols.layers import conv_bn

__all__ = ["BLOCKS", "MobileNet", "STAGES"]

STEM_CHANNELS = 32
# Per block 1-13, from the paper's table 1: (output channels at width 1.0, depthwise stride).
BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
          (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))
# Stage -> (stride, the block whose pointwise convolution ends it).
STAGES = (("c2", 4, 3), ("c3", 8, 5), ("c4", 16, 11), ("c5", 32, 13))


class MobileNet(Backbone):
    classifier_size = 224

    def __init__(self, multiplier):
        self.multiplier = multiplier
        self.name = "mobilenet%s" % multiplier

    def width(self, channels):
        """``channels`` at this width (GluonCV's ``int(channels * multiplier)``)."""
        return int(channels * self.multiplier)

    def stages(self):
        return [StageSpec(name, "block%d_pwise_relu" % last, stride,
                          self.width(BLOCKS[last - 1][0]))
                for name, stride, last in STAGES]

    def block(self, data, i):
        """Block ``i`` (1-13): the depthwise 3x3 on the previous block's channels, then the
        pointwise 1x1 to the block's."""
        in_channels = self.width(STEM_CHANNELS if i == 1 else BLOCKS[i - 2][0])
        channels, stride = BLOCKS[i - 1]
        out = conv_bn(data, "block%d_dwise" % i, in_channels, kernel=3, stride=stride,
                      groups=in_channels)
        return conv_bn(out, "block%d_pwise" % i, self.width(channels))

    def build_stage(self, data, stage_name):
        """The blocks from the previous stage's output (``data``) to ``stage_name``'s; ``c2``
        starts at the image. Names match the body, so weights are shared with it."""
        names = [name for name, _, _ in STAGES]
        if stage_name not in names:
            raise KeyError("%s has no stage %r; stages: %s" % (self.name, stage_name, names))
        index = names.index(stage_name)
        if index == 0:
            data = conv_bn(data, "conv1", self.width(STEM_CHANNELS), kernel=3, stride=2)
            first = 1
        else:
            first = STAGES[index - 1][2] + 1
        for i in range(first, STAGES[index][2] + 1):
            data = self.block(data, i)
        return data

    def _body(self, data):
        for name, _, _ in STAGES:
            data = self.build_stage(data, name)
        return data


def gluoncv_names(backbone):
    """Our names to those of GluonCV's ``mobilenet1.0``/``mobilenet0.25`` classifier files:
    ``features.{k}`` counts the stem's and each block's convolution, batch norm and ReLU."""
    mapping = {}
    conv_and_bn = functools.partial(map_conv_bn, mapping)
    conv_and_bn("conv1", "features.0", "features.1")
    for i in range(1, len(BLOCKS) + 1):
        for k, layer in enumerate(("dwise", "pwise")):
            at = 3 + 6 * (i - 1) + 3 * k
            conv_and_bn("block%d_%s" % (i, layer), "features.%d" % at, "features.%d" % (at + 1))
    mapping["fc_weight"] = "output.weight"
    mapping["fc_bias"] = "output.bias"
    return mapping


# GluonCV's counts of its classifiers (4.2M published for width 1.0, the paper's 4.2 million).
register_backbone("mobilenet1.0", functools.partial(MobileNet, 1.0),
                  published_params=4_231_976,
                  gluoncv=GluonCVBackbone("mobilenet1.0", gluoncv_names))
register_backbone("mobilenet0.25", functools.partial(MobileNet, 0.25),
                  published_params=470_072,
                  gluoncv=GluonCVBackbone("mobilenet0.25", gluoncv_names))
