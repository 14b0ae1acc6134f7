"""Model configurations: YAML files read with ``yaml.safe_load``, defaults, overrides.

A config is a plain dict. Per-data-shape values live under ``shapes:``; resolving
a config for its ``data_shape`` merges that section into the top level, so the
rest of the zoo sees one flat dict.
"""
import copy
import os

import yaml

from .detectors import ARCHITECTURES
from .errors import ConfigError

def load_config(path):
    """Read a model config from a YAML file; its name defaults to the file's stem.

    A ``base: OTHER`` entry starts from ``OTHER.yaml`` in the same folder and
    replaces the fields this file sets.
    """
    raw = _read_yaml(path)
    base = raw.pop("base", None)
    if base is not None:
        merged = load_config(os.path.join(os.path.dirname(path), "%s.yaml" % base))
        merged.pop("name")
        merged.update(raw)
        raw = merged
    raw.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    return raw


def _read_yaml(path):
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        with open(path) as stream:
            raw = yaml.safe_load(stream)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = "%s:%d" % (path, mark.line + 1) if mark else path
        raise ConfigError(name, "<file>", where, "valid YAML (%s)" % getattr(err, "problem", err)) \
            from None
    if not isinstance(raw, dict):
        raise ConfigError(name, "<file>", path, "a YAML mapping of config fields")
    return raw


def resolve(raw, overrides=None):
    """Apply defaults, ``overrides`` and the section of ``shapes`` for the data shape.

    Returns a new flat dict; ``supported_shapes`` lists the shapes the config declares.
    """
    config = copy.deepcopy(raw)
    name = config.get("name", "<unnamed>")
    arch = config.get("arch")
    if arch not in ARCHITECTURES:
        raise ConfigError(name, "arch", arch, "one of %s" % ", ".join(sorted(ARCHITECTURES)))
    defaults, required = ARCHITECTURES[arch].DEFAULTS, ARCHITECTURES[arch].REQUIRED
    for field, value in defaults.items():
        config.setdefault(field, copy.deepcopy(value))
    shapes = config.pop("shapes", None) or {}
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(config) - set(required) - {"name"})
    if unknown:
        raise ConfigError(name, unknown[0], overrides[unknown[0]],
                          "a known config field (%s)" % ", ".join(sorted(config)))
    data_shape = overrides.get("data_shape", config["data_shape"])
    if not isinstance(data_shape, int) or isinstance(data_shape, bool) or data_shape < 32:
        raise ConfigError(name, "data_shape", data_shape, "an integer image side >= 32")
    section = shapes.get(data_shape, {})
    if not isinstance(section, dict):
        raise ConfigError(name, "shapes.%d" % data_shape, section, "a mapping of fields")
    config.update(copy.deepcopy(section))
    config.update(overrides)
    config["supported_shapes"] = sorted(shapes) or [config["data_shape"]]
    missing = [field for field in required if field not in config]
    if missing:
        raise ConfigError(name, missing[0], None, "a required field for arch %r" % arch)
    return config
