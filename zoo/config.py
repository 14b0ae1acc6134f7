"""Model configurations: YAML files read with ``yaml.safe_load``, defaults, overrides.

A raw config is a plain dict. Per-data-shape values live under ``shapes:``;
:func:`resolve` merges that section into the top level and returns a
:class:`ModelSpec`, a read-only flat mapping that the rest of the zoo reads.
A spec never changes: the fields an architecture derives from the graph go
into a new spec (:meth:`ModelSpec.merged`), and the user's dict is never written.
"""
import collections.abc
import copy
import os

import yaml

from .detectors import ARCHITECTURES
from .errors import ConfigError


class ModelSpec(collections.abc.Mapping):
    """A resolved model config, read-only: no item or attribute can be set, and reading a
    list or dict field gives a copy, so changing what was read cannot change the spec."""

    __slots__ = ("_fields",)

    def __init__(self, fields):
        object.__setattr__(self, "_fields", copy.deepcopy(dict(fields)))

    def __getitem__(self, field):
        return copy.deepcopy(self._fields[field])

    def __iter__(self):
        return iter(self._fields)

    def __len__(self):
        return len(self._fields)

    def __setattr__(self, name, value):
        raise AttributeError("ModelSpec is read-only; use merged() for a new spec")

    def __delattr__(self, name):
        raise AttributeError("ModelSpec is read-only")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        return "ModelSpec(%r)" % self._fields

    def merged(self, fields):
        """A new spec with ``fields`` (e.g. an architecture's derived fields) set."""
        return ModelSpec(dict(self._fields, **copy.deepcopy(dict(fields))))

    def to_dict(self):
        """A plain deep-copied dict (JSON-able for configs read from YAML or JSON)."""
        return copy.deepcopy(self._fields)


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

    Returns a new :class:`ModelSpec`; neither ``raw`` nor ``overrides`` is changed.
    ``supported_shapes`` lists the shapes the config declares; a config resolved before
    (it has no ``shapes`` section any more) keeps the list it carries.
    """
    config = copy.deepcopy(dict(raw))
    name = config.get("name", "<unnamed>")
    arch = config.get("arch")
    if arch not in ARCHITECTURES:
        raise ConfigError(name, "arch", arch, "one of %s" % ", ".join(sorted(ARCHITECTURES)))
    defaults, required = ARCHITECTURES[arch].defaults, ARCHITECTURES[arch].required
    for field, value in defaults.items():
        config.setdefault(field, copy.deepcopy(value))
    shapes = config.pop("shapes", None) or {}
    overrides = copy.deepcopy(dict(overrides or {}))
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
    if shapes or "supported_shapes" not in config:
        config["supported_shapes"] = sorted(shapes) or [config["data_shape"]]
    missing = [field for field in required if field not in config]
    if missing:
        raise ConfigError(name, missing[0], None, "a required field for arch %r" % arch)
    return ModelSpec(config)
