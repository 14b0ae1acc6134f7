"""Per-architecture config knowledge: defaults, validation, input shapes, table entries.

Each module provides ``DEFAULTS``, ``REQUIRED``, ``symbols`` (the graph builder),
``prepare(config, backbone, graph)``, ``input_shapes``, ``train_input_shapes``
and ``describe``.
"""
from . import faster_rcnn, ssd

ARCHITECTURES = {"ssd": ssd, "faster_rcnn": faster_rcnn}
