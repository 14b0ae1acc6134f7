"""Inception-v3 in GluonCV's ``inceptionv3`` layout (without the auxiliary head).

Layer names follow the TF-slim/torchvision scheme: the stem is ``conv1a_3x3``,
``conv2a_3x3``, ``conv2b_3x3``, ``pool1``, ``conv3b_1x1``, ``conv4a_3x3``,
``pool2``; the blocks are ``mixed5b``-``mixed5d`` (35x35), ``mixed6a``-``mixed6e``
(17x17) and ``mixed7a``-``mixed7c`` (8x8), with branch layers such as
``mixed5b_branch5x5_2``, the branch pooling ``mixed5b_pool`` and the block
output ``mixed5b_concat``. Convolutions get ``_bn``/``_relu`` suffixes.

The network is written down once as data (stages of stem layers and blocks,
blocks of branches, branches of convolution settings); the symbol builder and
the GluonCV parameter map both walk that description, so they cannot drift.
"""
import functools
from collections import namedtuple

import mxnet as mx

from symbols.backbones.base import Backbone, StageSpec
from symbols.backbones.registry import GluonCVBackbone, map_conv_bn, register_backbone
from symbols.layers import conv_bn, pool

__all__ = ["BN_EPS", "Block", "Conv", "InceptionV3", "STAGES", "Stage"]

# GluonCV's Inception batch norms use epsilon 0.001, not layers.BN_EPS.
BN_EPS = 1e-3

Conv = namedtuple("Conv", "name channels kernel stride pad")
Pool = namedtuple("Pool", "name kind kernel stride pad")
# ``split``: parallel convolutions applied to the branch's output, each a separate
# piece of the block's concat (only the 8x8 blocks have them).
Branch = namedtuple("Branch", "pool convs split")
Block = namedtuple("Block", "name branches")
Stage = namedtuple("Stage", "name stride channels layers")


def _conv(name, channels, kernel=1, stride=1, pad=0):
    """Convolution settings; Gluon's Conv2D pads nothing unless told, unlike ``layers.conv``."""
    return Conv(name, channels, kernel, stride, pad)


def _branch(*convs, pool=None, split=()):
    return Branch(pool, tuple(convs), tuple(split))


# Mx's avg pooling counts padded zeros (count_include_pad defaults to true), as
# Gluon's AvgPool2D does, so the two agree at the borders.
_AVG_POOL = Pool("pool", "avg", 3, 1, 1)
_MAX_POOL = Pool("pool", "max", 3, 2, 0)


def _block_35(name, pool_features):
    """35x35 block (GluonCV ``_make_A``)."""
    return Block(name, (
        _branch(_conv("branch1x1", 64)),
        _branch(_conv("branch5x5_1", 48), _conv("branch5x5_2", 64, 5, pad=2)),
        _branch(_conv("branch3x3dbl_1", 64), _conv("branch3x3dbl_2", 96, 3, pad=1),
                _conv("branch3x3dbl_3", 96, 3, pad=1)),
        _branch(_conv("branch_pool", pool_features), pool=_AVG_POOL),
    ))


def _reduce_35_to_17(name):
    """35x35 -> 17x17 reduction (GluonCV ``_make_B``)."""
    return Block(name, (
        _branch(_conv("branch3x3", 384, 3, stride=2)),
        _branch(_conv("branch3x3dbl_1", 64), _conv("branch3x3dbl_2", 96, 3, pad=1),
                _conv("branch3x3dbl_3", 96, 3, stride=2)),
        _branch(pool=_MAX_POOL),
    ))


def _block_17(name, c7):
    """17x17 block with factorised 7x7 convolutions (GluonCV ``_make_C``)."""
    return Block(name, (
        _branch(_conv("branch1x1", 192)),
        _branch(_conv("branch7x7_1", c7), _conv("branch7x7_2", c7, (1, 7), pad=(0, 3)),
                _conv("branch7x7_3", 192, (7, 1), pad=(3, 0))),
        _branch(_conv("branch7x7dbl_1", c7), _conv("branch7x7dbl_2", c7, (7, 1), pad=(3, 0)),
                _conv("branch7x7dbl_3", c7, (1, 7), pad=(0, 3)),
                _conv("branch7x7dbl_4", c7, (7, 1), pad=(3, 0)),
                _conv("branch7x7dbl_5", 192, (1, 7), pad=(0, 3))),
        _branch(_conv("branch_pool", 192), pool=_AVG_POOL),
    ))


def _reduce_17_to_8(name):
    """17x17 -> 8x8 reduction (GluonCV ``_make_D``)."""
    return Block(name, (
        _branch(_conv("branch3x3_1", 192), _conv("branch3x3_2", 320, 3, stride=2)),
        _branch(_conv("branch7x7x3_1", 192), _conv("branch7x7x3_2", 192, (1, 7), pad=(0, 3)),
                _conv("branch7x7x3_3", 192, (7, 1), pad=(3, 0)),
                _conv("branch7x7x3_4", 192, 3, stride=2)),
        _branch(pool=_MAX_POOL),
    ))


def _block_8(name):
    """8x8 block with split 1x3/3x1 tails (GluonCV ``_make_E``)."""
    return Block(name, (
        _branch(_conv("branch1x1", 320)),
        _branch(_conv("branch3x3_1", 384),
                split=(_conv("branch3x3_2a", 384, (1, 3), pad=(0, 1)),
                       _conv("branch3x3_2b", 384, (3, 1), pad=(1, 0)))),
        _branch(_conv("branch3x3dbl_1", 448), _conv("branch3x3dbl_2", 384, 3, pad=1),
                split=(_conv("branch3x3dbl_3a", 384, (1, 3), pad=(0, 1)),
                       _conv("branch3x3dbl_3b", 384, (3, 1), pad=(1, 0)))),
        _branch(_conv("branch_pool", 192), pool=_AVG_POOL),
    ))


# Their concatenation, in order, is GluonCV's ``features`` sequence (minus the final
# pooling and dropout), so a layer's position there is its Gluon index.
STAGES = (
    Stage("c3", 8, 288, (
        _conv("conv1a_3x3", 32, 3, stride=2),
        _conv("conv2a_3x3", 32, 3),
        _conv("conv2b_3x3", 64, 3, pad=1),
        Pool("pool1", "max", 3, 2, 0),
        _conv("conv3b_1x1", 80),
        _conv("conv4a_3x3", 192, 3),
        Pool("pool2", "max", 3, 2, 0),
        _block_35("mixed5b", 32),
        _block_35("mixed5c", 64),
        _block_35("mixed5d", 64),
    )),
    Stage("c4", 16, 768, (
        _reduce_35_to_17("mixed6a"),
        _block_17("mixed6b", 128),
        _block_17("mixed6c", 160),
        _block_17("mixed6d", 160),
        _block_17("mixed6e", 192),
    )),
    Stage("c5", 32, 2048, (
        _reduce_17_to_8("mixed7a"),
        _block_8("mixed7b"),
        _block_8("mixed7c"),
    )),
)


def _output_name(layer):
    """Name of the operator that produces ``layer``'s output."""
    if isinstance(layer, Block):
        return layer.name + "_concat"
    if isinstance(layer, Conv):
        return layer.name + "_relu"
    return layer.name


def _apply_conv(data, name, spec):
    return conv_bn(data, name, spec.channels, spec.kernel, spec.stride, spec.pad, eps=BN_EPS)


def _apply_pool(data, name, spec):
    return pool(data, name, kind=spec.kind, kernel=spec.kernel, stride=spec.stride, pad=spec.pad)


def _apply_block(data, block):
    """All branches of ``block`` on ``data``, concatenated along channels in Gluon's order."""
    pieces = []
    for branch in block.branches:
        out = data
        if branch.pool is not None:
            out = _apply_pool(out, "%s_%s" % (block.name, branch.pool.name), branch.pool)
        for spec in branch.convs:
            out = _apply_conv(out, "%s_%s" % (block.name, spec.name), spec)
        if branch.split:
            pieces.extend(_apply_conv(out, "%s_%s" % (block.name, spec.name), spec)
                          for spec in branch.split)
        else:
            pieces.append(out)
    # One flat concat equals GluonCV's nested ones (concatenation is associative).
    return mx.sym.concat(*pieces, dim=1, name=block.name + "_concat")


class InceptionV3(Backbone):
    """Inception-v3 backbone with stages ``c3`` (35x35), ``c4`` (17x17) and ``c5`` (8x8) at 299."""

    name = "inceptionv3"
    classifier_size = 299

    def stages(self):
        # Each stage ends at its last block's concat: the next block's branches all
        # downsample, so that concat is the deepest layer every path goes through.
        return [StageSpec(stage.name, _output_name(stage.layers[-1]), stage.stride,
                          stage.channels) for stage in STAGES]

    @staticmethod
    def _stage(stage_name):
        for stage in STAGES:
            if stage.name == stage_name:
                return stage
        raise KeyError("unknown stage %r; stages are %s"
                       % (stage_name, ", ".join(s.name for s in STAGES)))

    def build_stage(self, data, stage_name):
        """The layers from the previous stage's output to ``stage_name``'s output, applied to
        ``data`` with the same names as in the full body (so their weights are shared)."""
        out = data
        for layer in self._stage(stage_name).layers:
            if isinstance(layer, Block):
                out = _apply_block(out, layer)
            elif isinstance(layer, Conv):
                out = _apply_conv(out, layer.name, layer)
            else:
                out = _apply_pool(out, layer.name, layer)
        return out

    def _body(self, data):
        for stage in STAGES:
            data = self.build_stage(data, stage.name)
        return data


def gluoncv_names(backbone):
    """Our names to those of GluonCV's ``inceptionv3`` classifier file: ``features.{i}`` the
    i-th layer of :data:`STAGES`, ``output`` the classifier."""
    mapping = {}
    conv_and_bn = functools.partial(map_conv_bn, mapping)

    def add(ours, theirs):
        conv_and_bn(ours, theirs + ".0", theirs + ".1")

    layers = [layer for stage in STAGES for layer in stage.layers]
    for index, layer in enumerate(layers):
        theirs = "features.%d" % index
        if isinstance(layer, Conv):
            add(layer.name, theirs)
        elif isinstance(layer, Block):
            for b, branch in enumerate(layer.branches):
                for spec, path in _branch_gluon_convs(branch):
                    add("%s_%s" % (layer.name, spec.name), "%s.%d.%s" % (theirs, b, path))
    mapping["fc_weight"] = "output.weight"
    mapping["fc_bias"] = "output.bias"
    return mapping


def _branch_gluon_convs(branch):
    """``(conv settings, Gluon path of its conv+bn+relu sequence)`` relative to the branch."""
    if branch.split:
        # Gluon nests these as Sequential[branch(convs), Concurrent[branch(conv), ...]].
        for i, spec in enumerate(branch.convs):
            yield spec, "0.%d" % i
        for k, spec in enumerate(branch.split):
            yield spec, "1.%d.0" % k
    else:
        offset = 1 if branch.pool is not None else 0
        for i, spec in enumerate(branch.convs):
            yield spec, str(i + offset)


register_backbone("inceptionv3", InceptionV3, published_params=23_834_568,
                  gluoncv=GluonCVBackbone("inceptionv3", gluoncv_names))
