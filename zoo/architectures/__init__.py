"""Detector architectures: each implements :class:`zoo.architectures.base.Architecture`
(config defaults, validation and derived fields, graph builders, named losses)."""
from zoo.architectures.base import Architecture
from zoo.architectures.faster_rcnn import FasterRCNN
from zoo.architectures.faster_rcnn_fpn import FasterRCNNFPN
from zoo.architectures.ssd import SSD

ARCHITECTURES = {arch.name: arch for arch in (SSD(), FasterRCNN(), FasterRCNNFPN())}

__all__ = ["ARCHITECTURES", "Architecture", "FasterRCNN", "FasterRCNNFPN", "SSD"]
