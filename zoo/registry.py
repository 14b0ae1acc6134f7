"""The registry of packaged model configs: one YAML file per model."""
import os

from .config import configs_dir, load_config
from .model import build_model


def list_models():
    """Names of the registered models, sorted."""
    return sorted(os.path.splitext(f)[0] for f in os.listdir(configs_dir()) if f.endswith(".yaml"))


def get_config(name):
    """The raw config of a registered model."""
    known = list_models()
    if name not in known:
        raise KeyError("unknown model %r; registered models: %s" % (name, ", ".join(known)))
    return load_config(os.path.join(configs_dir(), name + ".yaml"))


def get_model(name, pretrained_backbone=False, **overrides):
    """A registered model with any config field overridden, e.g. ``num_classes=3``."""
    return build_model(get_config(name), pretrained_backbone=pretrained_backbone, **overrides)
