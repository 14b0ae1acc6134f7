"""MobileNetV2 (width 1.0) in GluonCV's ``mobilenetv2_1.0`` layout.

Layer names: the stem ``conv1``; the 17 inverted-residual blocks, numbered
1-17 like torchvision's ``features.1``-``features.17``, as ``block{i}_expand``
(absent in block 1, whose expansion factor is 1), ``block{i}_dwise``,
``block{i}_project`` and, where the block keeps shape, the sum
``block{i}_add``; the final ``conv_last``. ``conv_bn`` adds ``_bn`` and
``_relu6``. The classifier is GluonCV's: global pooling, a bias-free 1x1
convolution ``fc`` and ``fc_flatten``.

Each stage ends at the deepest layer every path passes through at its
resolution: the expansion of the next stage's first (strided) block, which has
no shortcut, as SSDLite taps it; ``c5`` ends at ``conv_last``.
"""

import functools

import mxnet as mx

from symbols.backbones.base import Backbone, StageSpec
from symbols.backbones.registry import GluonCVBackbone, map_conv_bn, register_backbone
from symbols.layers import StrictNameManager, add, conv, conv_bn, pool

__all__ = ["BLOCKS", "MobileNetV2", "SETTINGS", "STAGES"]

# (expansion t, output channels, repeats n, stride of the first repeat), from the paper.
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
            (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
STEM_CHANNELS = 32
LAST_CHANNELS = 1280


def _block_table():
    """Per block (index 0 unused so block ``i`` is entry ``i``): (in, out, t, stride)."""
    table, in_channels = [None], STEM_CHANNELS
    for t, channels, repeats, stride in SETTINGS:
        for r in range(repeats):
            table.append((in_channels, channels, t, stride if r == 0 else 1))
            in_channels = channels
    return table


BLOCKS = _block_table()
# Stage -> (stride, block whose expansion ends it, None for conv_last).
STAGES = (("c2", 4, 4), ("c3", 8, 7), ("c4", 16, 14), ("c5", 32, None))


class MobileNetV2(Backbone):
    name = "mobilenetv2"
    classifier_size = 224

    def stages(self):
        specs = []
        for name, stride, cut in STAGES:
            if cut is None:
                specs.append(StageSpec(name, "conv_last_relu6", stride, LAST_CHANNELS))
            else:
                in_channels, _, t, _ = BLOCKS[cut]
                specs.append(StageSpec(name, "block%d_expand_relu6" % cut, stride,
                                       in_channels * t))
        return specs

    @staticmethod
    def expand(data, i):
        """The 1x1 expansion of block ``i`` (identity when t is 1)."""
        in_channels, _, t, _ = BLOCKS[i]
        if t == 1:
            return data
        return conv_bn(data, "block%d_expand" % i, in_channels * t, act="relu6")

    @staticmethod
    def reduce(expanded, data, i):
        """Depthwise 3x3 and linear 1x1 projection of block ``i``, plus the identity
        shortcut from the block input ``data`` when the block keeps shape."""
        in_channels, channels, t, stride = BLOCKS[i]
        width = in_channels * t
        out = conv_bn(expanded, "block%d_dwise" % i, width, kernel=3, stride=stride,
                      groups=width, act="relu6")
        out = conv_bn(out, "block%d_project" % i, channels, act=None)
        if stride == 1 and in_channels == channels:
            out = add(out, data, "block%d_add" % i)
        return out

    def block(self, data, i):
        return self.reduce(self.expand(data, i), data, i)

    def build_stage(self, data, stage_name):
        """Build only the layers from the previous stage's output (``data``) to the
        output of ``stage_name``; ``c2`` starts at the image. Names match the body,
        so weights are shared with it."""
        names = [name for name, _, _ in STAGES]
        if stage_name not in names:
            raise KeyError("unknown stage %r; stages: %s" % (stage_name, ", ".join(names)))
        index = names.index(stage_name)
        end = STAGES[index][2]
        if index == 0:
            out = conv_bn(data, "conv1", STEM_CHANNELS, kernel=3, stride=2, act="relu6")
            first = 1
        else:
            start = STAGES[index - 1][2]
            # A cut block strides, so it has no shortcut and needs only its expansion.
            out = self.reduce(data, None, start)
            first = start + 1
        for i in range(first, end or len(BLOCKS)):
            out = self.block(out, i)
        if end is None:
            return conv_bn(out, "conv_last", LAST_CHANNELS, act="relu6")
        return self.expand(out, end)

    def _body(self, data):
        for name, _, _ in STAGES:
            data = self.build_stage(data, name)
        return data

    def classifier(self, num_classes=1000):
        """GluonCV's classifier: global pooling, a 1x1 convolution without bias, flatten."""
        with StrictNameManager():
            out = pool(self._body(mx.sym.Variable("data")), "fc_pool", kind="avg",
                       kernel=1, stride=1, global_pool=True)
            out = conv(out, "fc", num_classes, kernel=1)
            return mx.sym.Flatten(data=out, name="fc_flatten")


def gluoncv_names(backbone):
    """Our names to those of GluonCV's ``mobilenetv2_1.0`` classifier file."""
    mapping = {}
    conv_and_bn = functools.partial(map_conv_bn, mapping)
    conv_and_bn("conv1", "features.0", "features.1")
    for i in range(1, len(BLOCKS)):
        theirs = "features.%d.out" % (i + 2)
        # Gluon indexes the block's children with its ReLU6s, and block 1 has no expansion.
        layers = ["dwise", "project"] if BLOCKS[i][2] == 1 else ["expand", "dwise", "project"]
        for k, layer in enumerate(layers):
            conv_and_bn("block%d_%s" % (i, layer), "%s.%d" % (theirs, 3 * k),
                        "%s.%d" % (theirs, 3 * k + 1))
    conv_and_bn("conv_last", "features.20", "features.21")
    mapping["fc_weight"] = "output.0.weight"
    return mapping


register_backbone("mobilenetv2", MobileNetV2, published_params=3_503_872,
                  gluoncv=GluonCVBackbone("mobilenetv2_1.0", gluoncv_names))
