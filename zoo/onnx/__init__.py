"""Deployment without MXNet: detectors exported to ONNX (:mod:`zoo.onnx.export`, which needs
MXNet and onnx) and run on ONNX Runtime (:mod:`zoo.onnx.runtime`, which does not need MXNet),
or written as OpenVINO models, fp32 or int8 calibrated by :mod:`zoo.onnx.int8`, and run on
OpenVINO (:mod:`zoo.onnx.openvino_runtime`, no MXNet either); :mod:`zoo.onnx.deployed` loads
either by the file's suffix.

The names below are the file's contract, shared by both sides (see :mod:`zoo.onnx.export`).
"""

__all__ = ["FORMAT", "GRAPH_PREPROCESSING", "OUTPUT"]
FORMAT = "1"
"""``zoo.format`` of the files this version writes and reads."""
OUTPUT = "detections"
GRAPH_PREPROCESSING = ("none", "normalize")
"""``none``: the graph takes ``data``, normalised; ``normalize``: ``image``, RGB pixels."""
