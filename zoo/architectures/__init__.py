"""Detector architectures: each implements :class:`zoo.architectures.base.Architecture`
(config defaults, validation and derived fields, graph builders, named losses)."""
from symbols import FACTORIES
from zoo.architectures.base import Architecture
from zoo.architectures.faster_rcnn import FasterRCNN
from zoo.architectures.faster_rcnn_fpn import FasterRCNNFPN
from zoo.architectures.ssd import SSD

ARCHITECTURES = {arch.name: arch for arch in (SSD(), FasterRCNN(), FasterRCNNFPN())}
"""The implementation of each architecture that ``symbols.FACTORIES`` (the one list of
architectures, which the config field ``arch`` accepts) registers."""
assert sorted(ARCHITECTURES) == sorted(FACTORIES), "an implementation per symbol factory"

__all__ = ["ARCHITECTURES", "Architecture", "FasterRCNN", "FasterRCNNFPN", "SSD"]
