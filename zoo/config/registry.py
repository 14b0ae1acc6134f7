"""The registry of packaged model configs: one YAML file per model."""
import os

from zoo.config.loading import configs_dir, load_config
from zoo.errors import ConfigError

__all__ = ["get_config", "is_network", "list_models", "network_config", "unknown_network"]


def list_models():
    """Names of the registered models, sorted."""
    return sorted(os.path.splitext(f)[0] for f in os.listdir(configs_dir()) if f.endswith(".yaml"))


def get_config(name):
    """The raw config of a registered model."""
    known = list_models()
    if name not in known:
        raise KeyError("unknown model %r; registered models: %s" % (name, ", ".join(known)))
    return load_config(os.path.join(configs_dir(), name + ".yaml"))


def unknown_network(name):
    """None for a registered model's name, else the one line saying it is not one."""
    known = list_models()
    return None if name in known else "unknown network %r; known: %s" % (name, ", ".join(known))


def is_network(value):
    """Whether ``value`` names a registered model or a YAML config file (``--network``)."""
    return unknown_network(value) is None or os.path.isfile(value)


def network_config(network):
    """The raw config of a YAML file or of a registered model: the one reading of
    ``--network``, raising :class:`zoo.ConfigError` for anything else."""
    if os.path.isfile(network):
        return load_config(network)
    if unknown_network(network):
        raise ConfigError(network, "network", network, "a registered model (%s) or a YAML "
                          "file" % ", ".join(list_models()))
    return get_config(network)
