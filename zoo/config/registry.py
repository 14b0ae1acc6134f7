"""The registry of packaged model configs: one YAML file per model."""
import os

from zoo.config.loading import configs_dir, load_config


def list_models():
    """Names of the registered models, sorted."""
    return sorted(os.path.splitext(f)[0] for f in os.listdir(configs_dir()) if f.endswith(".yaml"))


def get_config(name):
    """The raw config of a registered model."""
    known = list_models()
    if name not in known:
        raise KeyError("unknown model %r; registered models: %s" % (name, ", ".join(known)))
    return load_config(os.path.join(configs_dir(), name + ".yaml"))

