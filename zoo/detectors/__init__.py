"""Detector architectures: each implements :class:`zoo.detectors.base.Architecture`
(config defaults, validation and derived fields, graph builders, named losses)."""
from .base import Architecture
from .faster_rcnn import FasterRCNN
from .ssd import SSD

ARCHITECTURES = {arch.name: arch for arch in (SSD(), FasterRCNN())}

__all__ = ["ARCHITECTURES", "Architecture", "FasterRCNN", "SSD"]
