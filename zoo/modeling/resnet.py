"""ResNet-50/101 in the v1b layout (the stride sits on the 3x3 convolution).

Layer names: ``conv1``, ``stage{s}_unit{u}_conv{1,2,3}`` with ``_bn``/``_relu``
suffixes, ``stage{s}_unit1_downsample``, the unit's sum ``stage{s}_unit{u}_add``
and its output ``stage{s}_unit{u}_relu``. Stages are numbered 1-4 as
``res2``-``res5``.
"""
import functools

from .backbone import Backbone, StageSpec, map_conv_bn
from .layers import add, batchnorm, conv, conv_bn, pool, relu

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
        self.gluoncv_name = "resnet%d_v1b" % depth

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
        if downsample:
            shortcut = conv_bn(data, name + "_downsample", width * EXPANSION, kernel=1,
                               stride=stride, act=None)
        else:
            shortcut = data
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

    def gluoncv_param_map(self):
        mapping = {}
        conv_and_bn = functools.partial(map_conv_bn, mapping)
        conv_and_bn("conv1", "conv1", "bn1")
        for stage, count in enumerate(self.blocks, start=1):
            for unit in range(1, count + 1):
                ours = self.unit_name(stage, unit)
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

