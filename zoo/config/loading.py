"""Model configurations: YAML files read with :mod:`zoo.config.reader` (``yaml.safe_load``
refusing duplicate keys and alias bombs), defaults, overrides.

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

from zoo.config import reader
from zoo.errors import ConfigError
from zoo.schema.fields import COMMON

__all__ = ["ModelSpec", "class_names", "configs_dir", "load_config", "resolve", "validate"]


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


def class_names(config):
    """The config's class names, else the class ids as strings ("0", "1", ...)."""
    return list(config.get("class_names") or [str(i) for i in range(config["num_classes"])])


def load_config(path):
    """Read a model config from a YAML file and validate it at every data shape it declares;
    its name defaults to the file's stem.

    A ``base: OTHER`` entry starts from ``OTHER.yaml``, looked for beside the file, then
    in the registry (:func:`configs_dir`), and replaces the fields this file
    sets. Raises :class:`zoo.ConfigError` (one line) for a bad file, an unknown field, a
    missing base or a loop of bases, and for any field the schema rejects.
    """
    raw = _read_chain(path, ())
    raw.setdefault("name", _stem(path))
    validate(raw)
    return raw


def validate(raw):
    """Resolve ``raw`` at every data shape it supports: the specs, in the order of
    ``supported_shapes``. Raises :class:`zoo.ConfigError` for the first fault."""
    first = resolve(raw)
    return [first if shape == first["data_shape"] else resolve(raw, {"data_shape": shape})
            for shape in first["supported_shapes"]]


def _stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def _read_chain(path, chain):
    """The raw fields of ``path`` over those of its bases; ``chain``: the files that led here."""
    if any(os.path.realpath(path) == os.path.realpath(seen) for seen in chain):
        loop = " -> ".join(os.path.basename(p) for p in chain + (path,))
        raise ConfigError(_stem(chain[-1]), "base", _stem(path),
                          "a chain of bases without a loop, but %s" % loop)
    raw = _read_yaml(path)
    base = raw.pop("base", None)
    if base is None:
        return raw
    merged = _read_chain(_find_base(path, base), chain + (path,))
    merged.pop("name", None)
    merged.update(raw)
    return merged


def configs_dir():
    """The packaged configs (``zoo/configs`` when installed, ``configs/`` in a checkout)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    installed = os.path.join(package, "configs")
    return installed if os.path.isdir(installed) else os.path.join(os.path.dirname(package),
                                                                   "configs")


def _find_base(path, base):
    """``BASE.yaml`` beside ``path``, else in the registry (a file never bases on itself: a
    user's own ``ssd_resnet50.yaml`` may start from the registered one)."""
    if not isinstance(base, str) or not base:
        raise ConfigError(_stem(path), "base", base, "the name of another config file")
    file_name = base if base.endswith(".yaml") else base + ".yaml"
    folders = [os.path.dirname(os.path.abspath(path)), configs_dir()]
    for folder in folders:
        candidate = os.path.join(folder, file_name)
        if os.path.isfile(candidate) and os.path.realpath(candidate) != os.path.realpath(path):
            return candidate
    raise ConfigError(_stem(path), "base", base, "a config %s beside the file (%s) or in the "
                      "registry (%s)" % (file_name, folders[0], folders[1]))


def _read_yaml(path):
    name = _stem(path)
    try:
        with open(path, encoding="utf-8") as stream:
            raw = reader.load(stream)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = "%s:%d" % (path, mark.line + 1) if mark else path
        raise ConfigError(name, "<file>", where, "valid YAML (%s)" % getattr(err, "problem", err)) \
            from None
    except UnicodeDecodeError as err:
        raise ConfigError(name, "<file>", path, "UTF-8 text (byte %d is not)" % err.start) \
            from None
    except OSError as err:  # missing, a folder, unreadable
        raise ConfigError(name, "<file>", path, "a readable YAML file (%s)"
                          % (err.strerror or err)) from None
    if not isinstance(raw, dict):
        raise ConfigError(name, "<file>", path, "a YAML mapping of config fields")
    return raw


def resolve(raw, overrides=None):
    """Apply defaults, the section of ``shapes`` for the data shape and ``overrides``, and
    validate the result against the architecture's schema and cross-field checks; no graph
    is built.

    Returns a new :class:`ModelSpec`; neither ``raw`` nor ``overrides`` is changed.
    ``supported_shapes`` lists the shapes the config declares; a config resolved before
    (it has no ``shapes`` section any more) keeps the list it carries. Unknown fields, in
    ``raw``, a ``shapes`` section or ``overrides``, are rejected with the closest known name.
    """
    if not isinstance(raw, collections.abc.Mapping):
        raise ConfigError("<unnamed>", "<config>", raw, "a mapping of config fields")
    config = copy.deepcopy(dict(raw))
    overrides = copy.deepcopy(dict(overrides or {}))
    name = config.get("name", "<unnamed>")
    arch = _architecture(name, overrides.get("arch", config.get("arch")))
    shapes = _shape_sections(name, arch.schema, config.pop("shapes", None))
    arch.schema.check_known(name, config)
    arch.schema.check_known(name, overrides)
    for field, value in arch.defaults.items():
        config.setdefault(field, copy.deepcopy(value))
    data_shape = overrides.get("data_shape", config["data_shape"])
    arch.schema.fields["data_shape"].check({"name": name, "data_shape": data_shape})
    config.update(copy.deepcopy(shapes.get(data_shape, {})))
    config.update(overrides)
    if shapes or "supported_shapes" not in config:
        config["supported_shapes"] = sorted(shapes) or [config["data_shape"]]
    missing = [field for field in arch.required if field not in config]
    if missing:
        raise ConfigError(name, missing[0], None, "a required field for arch %r" % arch.name)
    arch.schema.validate(config)
    spec = ModelSpec(config)
    arch.check_fields(spec)
    return spec


def _architecture(name, arch):
    # The architectures build MXNet graphs: imported when a config is resolved, so that
    # listing the registered models (zoo benchmark's --help) needs no MXNet.
    from zoo.architectures import ARCHITECTURES
    COMMON["arch"].check({"name": name, "arch": arch})
    return ARCHITECTURES[arch]


def _shape_sections(name, schema, shapes):
    """``{data shape: fields}`` of a ``shapes`` entry, every key and field checked."""
    if shapes is None:
        return {}
    if not isinstance(shapes, dict):
        raise ConfigError(name, "shapes", shapes,
                          "a mapping of data shapes to the fields that differ at each")
    for shape, section in shapes.items():
        fault = schema.fields["data_shape"].type.error(shape, {})
        if fault:
            raise ConfigError(name, "shapes", shape, "data shapes as keys, each " + fault)
        if not isinstance(section, dict):
            raise ConfigError(name, "shapes.%d" % shape, section, "a mapping of fields")
        schema.check_known(name, section, where="shapes.%d." % shape)
        for field in ("arch", "name", "data_shape"):
            if field in section:
                raise ConfigError(name, "shapes.%d.%s" % (shape, field), section[field],
                                  "set outside shapes: a shape section holds the fields that "
                                  "differ at one data shape")
    return shapes
