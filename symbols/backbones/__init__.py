"""Backbones with declared stages, and their registry (:mod:`symbols.backbones.registry`).

Each module of this package defines its backbones and registers them
(:func:`register_backbone`); importing the package imports every module of it, so a new
backbone's module is all the registry needs.
"""
import importlib
import pkgutil

from symbols.backbones.base import Backbone, StageSpec
from symbols.backbones.inception_v3 import InceptionV3
from symbols.backbones.mobilenetv2 import MobileNetV2
from symbols.backbones.registry import BACKBONES, register_backbone, unregister_backbone
from symbols.backbones.resnet import ResNetV1, ResNetV1b

__all__ = ["BACKBONES", "Backbone", "InceptionV3", "MobileNetV2", "ResNetV1",
           "ResNetV1b", "StageSpec",
           "get_backbone", "register_backbone", "unregister_backbone"]



def _import_modules():
    """Import every module of the package (those above are already): a backbone's module
    registers it when imported, and nothing else lists it."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module("%s.%s" % (__name__, module.name))


_import_modules()


def get_backbone(name):
    """Instantiate a registered backbone by name."""
    try:
        return BACKBONES[name]()
    except KeyError:
        raise KeyError("unknown backbone %r; known backbones: %s"
                       % (name, ", ".join(sorted(BACKBONES)))) from None
