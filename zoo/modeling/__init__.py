"""Deprecated: the symbol builders moved to the top-level package :mod:`symbols` (0.2.0).

``zoo.modeling`` and its submodules still import, with a :class:`DeprecationWarning`, as
aliases of their new homes; use ``symbols`` (and :mod:`zoo.pretrained.maps` for GluonCV's
parameter names).
"""
import importlib
import sys
import warnings

MOVED = {
    # old submodule: its new home
    "backbone": "symbols.backbones.base", "resnet": "symbols.backbones.resnet",
    "mobilenetv2": "symbols.backbones.mobilenetv2",
    "inception_v3": "symbols.backbones.inception_v3", "layers": "symbols.layers",
    "box_coder": "symbols.box_coder", "ssd": "symbols.ssd", "faster_rcnn": "symbols.faster_rcnn",
    "fpn": "symbols.fpn", "rcnn_targets": "symbols.rcnn_targets",
}

warnings.warn("zoo.modeling moved to the top-level package `symbols` (backbones: "
              "symbols.backbones); zoo.modeling will be removed", DeprecationWarning, stacklevel=2)

for _old, _new in MOVED.items():
    sys.modules[__name__ + "." + _old] = importlib.import_module(_new)

from symbols.backbones import *  # noqa: E402,F401,F403  (BACKBONES, get_backbone, ...)
from symbols.backbones import __all__  # noqa: E402,F401
