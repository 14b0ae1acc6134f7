"""An object-detection model zoo on Apache MXNet whose configs are checked against the graph."""
import os
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("mxnet-detection-zoo")
except _metadata.PackageNotFoundError:  # a source tree used without installing it
    __version__ = "unknown"

# MXNet's CPU operators otherwise run element-wise work (ReLU6's clip, batch norm) on one
# OpenMP thread here; all cores halve the training step. Only effective before MXNet loads.
os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))

from .config import load_config  # noqa: E402
from .errors import ConfigError, DataError, PretrainedNotFound
from .model import DetectionModel, build_model
from .registry import get_config, get_model, list_models
from .detector import Detections, Detector, load_detector  # noqa: I001  builds on the above

__all__ = ["ConfigError", "DataError", "DetectionModel", "Detections", "Detector",
           "PretrainedNotFound", "build_model", "load_detector",
           "get_config",
           "get_model", "list_models", "load_config"]
