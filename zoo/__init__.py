"""An object-detection model zoo on Apache MXNet whose configs are checked against the graph.

``import zoo`` loads no MXNet and leaves the process as it found it (its environment, its
import hooks): its names and submodules are imported on first use (:func:`__getattr__`), so
that an ONNX or OpenVINO deployment (:func:`open_detector`, which opens any checkpoint,
:func:`load_onnx_detector`, :func:`load_openvino_detector`, or :func:`load_deployed_detector`
for either) runs where MXNet is not installed. A name that runs MXNet (:data:`ON_MXNET`)
chooses the settings the zoo runs fastest with on first use, where MXNet is not loaded yet
(:func:`zoo.process.use_fast_settings`); :func:`open_detector` does when it opens an
artifact.
"""
import importlib
import importlib.util

from zoo import process
from zoo.errors import ConfigError, DataError, PretrainedNotFound
from zoo.version import __version__

LAZY = {
    # name: the submodule defining it
    "DetectionModel": "model", "build_model": "model", "get_model": "model",
    "load_config": "config", "get_config": "config", "list_models": "config",
    "Detections": "inference.runner", "write_coco_results": "inference.runner",
    "Detector": "inference.detector",
    "load_detector": "inference.detector",
    "load_onnx_detector": "onnx.runtime", "load_openvino_detector": "onnx.openvino_runtime",
    "load_deployed_detector": "onnx.deployed", "open_detector": "checkpoint",
}
ON_MXNET = ("DetectionModel", "Detector", "build_model", "get_config", "get_model",
            "load_config", "load_detector")
"""The names of :data:`LAZY` that load MXNet, when imported or called (a config resolves
against the graph): the settings are chosen before."""

__all__ = ["ConfigError", "DataError", "DetectionModel", "Detections", "Detector",
           "PretrainedNotFound", "__version__", "build_model", "get_config", "get_model",
           "list_models", "load_config", "load_deployed_detector", "load_detector",
           "load_onnx_detector", "load_openvino_detector", "open_detector",
           "write_coco_results"]


def __getattr__(name):
    """A name of :data:`LAZY` or a submodule (``zoo.artifact``), imported now."""
    if name in LAZY:
        if name in ON_MXNET:
            process.use_fast_settings()
        return getattr(importlib.import_module("." + LAZY[name], __name__), name)
    if not name.startswith("_") and importlib.util.find_spec("%s.%s" % (__name__, name)):
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    """The names defined here and the lazy ones."""
    return sorted(set(globals()) | set(__all__))
