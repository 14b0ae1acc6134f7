"""An object-detection model zoo on Apache MXNet whose configs are checked against the graph."""
import os

from .version import __version__

# MXNet's CPU operators otherwise run element-wise work (ReLU6's clip, batch norm) on one
# OpenMP thread here; all cores halve the training step. Only effective before MXNet loads.
os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))

from .config import load_config  # noqa: E402
from .errors import ConfigError, DataError, PretrainedNotFound
from .model import DetectionModel, build_model
from .registry import get_config, get_model, list_models
from .detector import Detections, Detector, load_detector  # noqa: I001  builds on the above

__all__ = ["ConfigError", "DataError", "DetectionModel", "Detections", "Detector",
           "PretrainedNotFound", "__version__", "build_model", "get_config", "get_model",
           "list_models", "load_config", "load_detector"]
