"""GluonCV's names for the parameters of each backbone, from the backbone's registration
(:func:`symbols.backbones.register_backbone`, its ``gluoncv``): the map from our parameter
names to the keys of GluonCV's ``save_parameters`` files (:func:`param_map`), and the name of
the backbone's GluonCV classifier (:func:`gluoncv_name`). A backbone registered without one
has no pretrained weights (:class:`zoo.PretrainedNotFound` says so).

:mod:`zoo.pretrained` loads ImageNet backbones with them and :mod:`zoo.gluoncv` imports
GluonCV's detectors with them.
"""
from collections.abc import Mapping

from symbols.backbones import BACKBONES
from symbols.backbones.registry import GLUON_BN_PARAMS, GluonCVBackbone, map_conv_bn

from zoo.errors import PretrainedNotFound

__all__ = ["GLUONCV", "GLUON_BN_PARAMS", "GluonCVBackbone", "gluoncv_name", "map_conv_bn",
           "param_map"]


class _GluonCVBackbones(Mapping):
    """The registered backbones that have a GluonCV classifier: name to
    :class:`GluonCVBackbone`, read from the registry at each use."""

    def __getitem__(self, name):
        gluoncv = BACKBONES[name].gluoncv
        if gluoncv is None:
            raise KeyError(name)
        return gluoncv

    def __iter__(self):
        return (name for name, entry in BACKBONES.items() if entry.gluoncv is not None)

    def __len__(self):
        return sum(1 for _ in self)


GLUONCV = _GluonCVBackbones()
"""By backbone name, GluonCV's classifier of the backbones that have one."""


def _gluoncv(name):
    """The registered :class:`GluonCVBackbone` of the backbone ``name``."""
    gluoncv = BACKBONES[name].gluoncv
    if gluoncv is None:
        raise PretrainedNotFound("backbone %s has no GluonCV classifier to take pretrained "
                                 "weights from: train it from scratch (no "
                                 "pretrained_backbone)" % name)
    return gluoncv


def gluoncv_name(backbone):
    """The name of GluonCV's ImageNet classifier of ``backbone``'s network."""
    return _gluoncv(backbone.name).name


def param_map(backbone):
    """Our parameter names of ``backbone`` (classifier ``fc_*`` included) to the keys of
    GluonCV's ``save_parameters`` file of :func:`gluoncv_name`."""
    return _gluoncv(backbone.name).param_map(backbone)
