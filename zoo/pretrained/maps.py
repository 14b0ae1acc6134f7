"""GluonCV's names for the parameters of each backbone: the maps from our parameter names
to the keys of GluonCV's ``save_parameters`` files, by backbone (:func:`param_map`), and the
name of each backbone's GluonCV classifier (:func:`gluoncv_name`), one :data:`GLUONCV`
entry per backbone.

They live here, not in :mod:`symbols.backbones`, because they are GluonCV's knowledge: the
symbol factories know only their own names. :mod:`zoo.pretrained` loads ImageNet backbones
with them and :mod:`zoo.gluoncv` imports GluonCV's detectors with them.
"""
import functools
from dataclasses import dataclass
from typing import Callable

from symbols.backbones.inception_v3 import STAGES as INCEPTION_STAGES, Block, Conv
from symbols.backbones.mobilenetv2 import BLOCKS as MOBILENET_BLOCKS

__all__ = ["GLUONCV", "GLUON_BN_PARAMS", "GluonCVBackbone", "gluoncv_name", "param_map"]

GLUON_BN_PARAMS = (("gamma", "gamma"), ("beta", "beta"),
                   ("moving_mean", "running_mean"), ("moving_var", "running_var"))


def map_conv_bn(mapping, ours, theirs_conv, theirs_bn):
    """Add the entries for one of our ``conv_bn`` layers (conv ``ours``, norm ``ours_bn``)
    given the Gluon paths of the matching convolution and batch norm."""
    mapping[ours + "_weight"] = theirs_conv + ".weight"
    for ours_suffix, theirs_suffix in GLUON_BN_PARAMS:
        mapping[ours + "_bn_" + ours_suffix] = theirs_bn + "." + theirs_suffix


def _resnet_v1b(backbone):
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


def _resnet_v1(backbone):
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


def _mobilenetv2(backbone):
    mapping = {}
    conv_and_bn = functools.partial(map_conv_bn, mapping)
    conv_and_bn("conv1", "features.0", "features.1")
    for i in range(1, len(MOBILENET_BLOCKS)):
        theirs = "features.%d.out" % (i + 2)
        # Gluon indexes the block's children with its ReLU6s, and block 1 has no expansion.
        layers = (["dwise", "project"] if MOBILENET_BLOCKS[i][2] == 1
                  else ["expand", "dwise", "project"])
        for k, layer in enumerate(layers):
            conv_and_bn("block%d_%s" % (i, layer), "%s.%d" % (theirs, 3 * k),
                        "%s.%d" % (theirs, 3 * k + 1))
    conv_and_bn("conv_last", "features.20", "features.21")
    mapping["fc_weight"] = "output.0.weight"
    return mapping


def _inceptionv3(backbone):
    mapping = {}
    conv_and_bn = functools.partial(map_conv_bn, mapping)

    def add(ours, theirs):
        conv_and_bn(ours, theirs + ".0", theirs + ".1")

    layers = [layer for stage in INCEPTION_STAGES for layer in stage.layers]
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


@dataclass(frozen=True)
class GluonCVBackbone:
    """What GluonCV knows of one of our backbones: the name of its ImageNet classifier of
    the same network, and the function mapping our parameter names to its file's keys."""
    name: str
    param_map: Callable


GLUONCV = {
    # one entry per backbone of symbols.backbones.BACKBONES, under its name there
    "resnet50": GluonCVBackbone("resnet50_v1b", _resnet_v1b),
    "resnet101": GluonCVBackbone("resnet101_v1b", _resnet_v1b),
    "resnet50_v1": GluonCVBackbone("resnet50_v1", _resnet_v1),
    "mobilenetv2": GluonCVBackbone("mobilenetv2_1.0", _mobilenetv2),
    "inceptionv3": GluonCVBackbone("inceptionv3", _inceptionv3),
}


def gluoncv_name(backbone):
    """The name of GluonCV's ImageNet classifier of ``backbone``'s network."""
    return GLUONCV[backbone.name].name


def param_map(backbone):
    """Our parameter names of ``backbone`` (classifier ``fc_*`` included) to the keys of
    GluonCV's ``save_parameters`` file of :func:`gluoncv_name`."""
    return GLUONCV[backbone.name].param_map(backbone)
