"""Model configs: reading YAML files (``base:`` chains), resolving them against their
architecture's schema into a read-only :class:`ModelSpec` (:func:`resolve`), and the registry
of packaged configs (:func:`list_models`, :func:`get_config`)."""
from zoo.config.loading import ModelSpec, configs_dir, load_config, resolve, validate
from zoo.config.registry import get_config, list_models

__all__ = ["ModelSpec", "configs_dir", "get_config", "list_models", "load_config", "resolve",
           "validate"]
