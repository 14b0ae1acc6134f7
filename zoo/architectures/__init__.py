"""Detector architectures: each implements :class:`zoo.architectures.base.Architecture`
(config defaults, validation and derived fields, graph builders, named losses)."""
import importlib

from symbols import FACTORIES
from zoo.architectures.base import Architecture
from zoo.architectures.faster_rcnn import FasterRCNN
from zoo.architectures.faster_rcnn_fpn import FasterRCNNFPN
from zoo.architectures.ssd import SSD

__all__ = ["ARCHITECTURES", "Architecture", "FasterRCNN", "FasterRCNNFPN", "SSD"]


def _implementation(arch):
    """The implementation of ``arch``: the class ``ARCHITECTURE`` of the module of the same
    name in this package, named ``arch``."""
    return importlib.import_module("%s.%s" % (__name__, arch)).ARCHITECTURE(arch)


ARCHITECTURES = {arch: _implementation(arch) for arch in FACTORIES}
"""The implementation of each architecture of ``symbols.FACTORIES`` (the one list of
architectures, which the config field ``arch`` accepts), by name."""
