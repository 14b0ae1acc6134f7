"""An object-detection model zoo on Apache MXNet whose configs are checked against the graph."""
from .config import load_config
from .errors import ConfigError, PretrainedNotFound
from .model import DetectionModel, build_model
from .registry import get_config, get_model, list_models

__all__ = ["ConfigError", "DetectionModel", "PretrainedNotFound", "build_model", "get_config",
           "get_model", "list_models", "load_config"]
