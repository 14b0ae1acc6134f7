"""Deployment without MXNet: detectors exported to ONNX (:mod:`zoo.onnx.export`, which needs
MXNet and onnx) and run on ONNX Runtime (:mod:`zoo.onnx.runtime`, which does not need MXNet).

The names below are the file's contract, shared by both sides (see :mod:`zoo.onnx.export`).
"""

__all__ = ["FORMAT", "GRAPH_PREPROCESSING", "OUTPUT"]
FORMAT = "1"
"""``zoo.format`` of the files this version writes and reads."""
OUTPUT = "detections"
GRAPH_PREPROCESSING = ("none", "normalize")
"""``none``: the graph takes ``data``, normalised; ``normalize``: ``image``, RGB pixels."""
