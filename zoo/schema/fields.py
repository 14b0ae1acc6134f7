"""The config schema: every model config field declared once.

A :class:`Field` has a name, a value type (:class:`Int`, :class:`Number`, :class:`Bool`,
:class:`Str`, :class:`List`, :class:`Optional`) carrying its range, length rule and
choices, a default (or :data:`REQUIRED`) and a one-line description. Fields both
architectures share are declared here once (:data:`COMMON`); each architecture adds
its own in a :class:`Schema` (``zoo/detectors/ssd.py``, ``faster_rcnn.py``), whose
:meth:`Schema.defaults` is that architecture's ``defaults``.

:meth:`Schema.validate` checks a resolved config field by field, in declaration order,
before any graph is built, and raises :class:`zoo.ConfigError` for the first fault:
one line naming the model, the field (``sizes[5][0]`` for an entry), the value and
what is expected. Checks that relate fields to each other or to the backbone graph
stay with the architecture.
"""
import dataclasses
import difflib
import json
import types
import typing

from zoo.errors import ConfigError
from symbols import FACTORIES
from zoo.schema.preprocessing import INTERPOLATIONS, MEAN_PIXELS, STD_PIXELS, WARP
from zoo.schema.checks import is_int, is_number

__all__ = ["Bool", "COMMON", "DERIVED", "FRACTION", "Field", "Int", "List", "Number", "Optional",
           "PER_ARCH", "REQUIRED", "Schema", "Str", "model_name"]

REQUIRED = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()
"""The default of a field every config must set."""

PER_ARCH = type("PerArch", (), {"__repr__": lambda self: "PER_ARCH"})()
"""The default of a shared field that each architecture sets (:class:`Schema`)."""

DERIVED = type("Derived", (), {"__repr__": lambda self: "DERIVED"})()
"""The default of a field the zoo derives when it builds a model (a stored config carries
it, so a rebuild from ``model.config`` accepts it; building replaces it)."""


def _bound(value):
    return "%g" % value if isinstance(value, float) else str(value)


@dataclasses.dataclass(frozen=True)
class Number:
    """A finite real number in a range; ``special`` values (e.g. ``-1``) are allowed besides."""

    low: typing.Optional[float] = None
    high: typing.Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    special: tuple = ()
    what: str = "a number"
    note: str = ""

    def accepts_type(self, value):
        return is_number(value)

    def error(self, value, config):
        if self.accepts_type(value) and value in self.special:
            return None
        ok = self.accepts_type(value) and not (
            self.low is not None and (value < self.low or (self.low_open and value == self.low))
            or self.high is not None and (value > self.high
                                          or (self.high_open and value == self.high)))
        return None if ok else self.phrase(config)

    def phrase(self, config=None):
        what = self.what
        if self.low is not None and self.high is not None:
            what += " in %s%s, %s%s" % ("(" if self.low_open else "[", _bound(self.low),
                                        _bound(self.high), ")" if self.high_open else "]")
        elif self.low == 0 and self.low_open:
            what = what.replace("a number", "a positive number").replace(
                "an integer", "a positive integer")
        elif self.low == 1 and isinstance(self, Int):
            what = what.replace("an integer", "a positive integer")
        elif self.low is not None:
            what += " %s %s" % (">" if self.low_open else ">=", _bound(self.low))
        if self.special:
            what = "%s or %s" % (" or ".join(map(str, self.special)), what)
        return what + (" (%s)" % self.note if self.note else "")


@dataclasses.dataclass(frozen=True)
class Int(Number):
    """An integer (not a bool, not a float) in a range."""

    what: str = "an integer"

    def accepts_type(self, value):
        return is_int(value)


@dataclasses.dataclass(frozen=True)
class Bool:
    """``true`` or ``false`` (a YAML string such as ``"no"`` is not a bool)."""

    def error(self, value, config):
        return None if isinstance(value, bool) else self.phrase()

    def phrase(self, config=None):
        return "true or false"


@dataclasses.dataclass(frozen=True)
class Str:
    """A string, optionally non-empty or one of ``choices`` (a tuple, or a callable giving
    one, read when checked)."""

    choices: typing.Any = None
    nonempty: bool = False
    what: str = "a string"

    def _choices(self):
        return tuple(self.choices()) if callable(self.choices) else self.choices

    def error(self, value, config):
        ok = isinstance(value, str) and (value or not self.nonempty) and (
            not self.choices or value in self._choices())
        return None if ok else self.phrase()

    def phrase(self, config=None):
        if self.choices:
            return "one of %s" % ", ".join(self._choices())
        return ("a non-empty " + self.what[2:]) if self.nonempty else self.what


@dataclasses.dataclass(frozen=True)
class List:
    """A list of ``item`` values. ``length``: ``None`` (any, at least ``min_length``), an
    int, or the name of another field: its length if it is a list (``from_layers``: one
    entry per feature map), its value if it is an int (``num_classes``)."""

    item: typing.Any
    length: typing.Any = None
    min_length: int = 1
    distinct: bool = False
    note: str = ""

    def expected_length(self, config):
        if self.length is None or isinstance(self.length, int):
            return self.length
        other = config.get(self.length)
        return len(other) if isinstance(other, list) else other

    def length_phrase(self, config):
        count = self.expected_length(config)
        if count is None:
            return "a non-empty list" if self.min_length else "a list"
        if isinstance(self.length, int):
            return "a list of %d entries" % count
        other = config.get(self.length)
        if isinstance(other, list):
            return "%d entries, one per %s entry" % (count, self.length)
        return "%s entries (%s = %s)" % (count, self.length, count)

    def error(self, value, config):
        """``None``, or ``(index path, value, expected)`` of the first fault."""
        count = self.expected_length(config)
        if not isinstance(value, list) or (count is None and len(value) < self.min_length) \
                or (count is not None and len(value) != count):
            return "", value, self.phrase(config)
        for index, entry in enumerate(value):
            fault = self.item.error(entry, config)
            if isinstance(fault, tuple):
                return ("[%d]%s" % (index, fault[0]),) + fault[1:]
            if fault is not None:
                return "[%d]" % index, entry, fault
        if self.distinct and len(set(value)) != len(value):
            return "", value, self.phrase(config)
        return None

    def phrase(self, config=None):
        joint = "; each " if isinstance(self.item, List) else ", each "
        text = self.length_phrase(config or {}) + joint + self.item.phrase(config)
        text += " with no repeated value" if self.distinct else ""
        return text + (" (%s)" % self.note if self.note else "")


@dataclasses.dataclass(frozen=True)
class Optional:
    """``null`` or a ``value``."""

    value: typing.Any

    def error(self, value, config):
        if value is None:
            return None
        fault = self.value.error(value, config)
        if isinstance(fault, tuple) and not fault[0]:
            return fault[:2] + ("null or " + fault[2],)
        return ("null or " + fault) if isinstance(fault, str) else fault

    def phrase(self, config=None):
        return "null or " + self.value.phrase(config)


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    type: typing.Any
    default: typing.Any
    description: str

    def check(self, config):
        """Raise ConfigError if ``config``'s value of this field is wrong."""
        if self.name not in config:
            return
        value = config[self.name]
        fault = self.type.error(value, config)
        if fault is None:
            return
        if isinstance(fault, str):
            fault = ("", value, fault)
        raise ConfigError(model_name(config), self.name + fault[0], fault[1], fault[2])

    def with_default(self, default):
        return dataclasses.replace(self, default=default)


def model_name(config):
    return config.get("name", "<unnamed>")


def backbone_names():
    """The registered backbones' names, sorted; imported when a config is checked, since
    the registry's modules import MXNet (listing the configs needs none)."""
    from symbols.backbones import BACKBONES
    return sorted(BACKBONES)


FRACTION = Number(0, 1, low_open=True)
"""A threshold or fraction in (0, 1]."""

COMMON = types.MappingProxyType({field.name: field for field in (
    Field("name", Str(nonempty=True), "<unnamed>",
          "the model's name (a YAML file's stem by default)"),
    Field("arch", Str(choices=lambda: sorted(FACTORIES)), REQUIRED,
          "the detector family (a symbol factory of symbols.FACTORIES)"),
    Field("backbone", Str(choices=backbone_names), REQUIRED,
          "a registered backbone"),
    Field("num_classes", Int(1), 20, "number of foreground classes"),
    Field("class_names", Optional(List(Str(nonempty=True), length="num_classes",
                                       distinct=True)), None,
          "optional class names, one per class"),
    Field("category_ids", Optional(List(Int(), length="num_classes", distinct=True)), None,
          "optional COCO category ids, one per class: training on a COCO file sets the "
          "file's; COCO results name classes by them (null: class id + 1)"),
    Field("data_shape", Int(32, what="an integer image side"), PER_ARCH,
          "input side in pixels"),
    Field("supported_shapes", List(Int(32, what="an integer image side")), DERIVED,
          "the data shapes the config declares (the keys of its `shapes`)"),
    Field("mean_pixels", List(Number(what="a finite number"), length=3), list(MEAN_PIXELS),
          "per-channel RGB mean subtracted from the pixels"),
    Field("std_pixels", List(Number(0, low_open=True), length=3), list(STD_PIXELS),
          "per-channel RGB standard deviation the pixels are divided by"),
    Field("interpolation", Str(choices=INTERPOLATIONS), WARP,
          "how inference resizes an image: `warp` (bilinear, as training), or OpenCV's "
          "resize `bilinear`, `bicubic` (GluonCV's Faster R-CNN `transform_test`) or `auto` "
          "(area shrinking, bicubic enlarging: GluonCV's SSD)"),
    Field("nms_threshold", FRACTION, PER_ARCH,
          "IoU above which NMS suppresses the lower-scored box"),
    Field("nms_topk", Int(1, special=(-1,), note="-1: all"), PER_ARCH,
          "detections kept per image before the final NMS, the best by score (-1: all; "
          "MXNet's CPU NMS costs about the square of their number)"),
    Field("score_threshold", Number(0, 1, high_open=True), PER_ARCH,
          "scores below are dropped in the graph, before the final NMS (a detector's "
          "`score_threshold`, `zoo detect --threshold`, then picks the ones reported)"),
)})
"""Fields every architecture has; each sets its own default of those whose default is
:data:`PER_ARCH` (``data_shape``, ``nms_threshold``, ``nms_topk``, ``score_threshold``)."""

class Schema:
    """An architecture's fields: :data:`COMMON` with per-architecture defaults, then its own."""

    def __init__(self, arch, fields, defaults):
        """``fields``: the architecture's own :class:`Field` list; ``defaults``: its default
        of every :data:`PER_ARCH` field of :data:`COMMON`."""
        per_arch = {name for name, field in COMMON.items() if field.default is PER_ARCH}
        assert set(defaults) == per_arch, "defaults must be given for %s" % sorted(per_arch)
        clash = set(COMMON) & {field.name for field in fields}
        assert not clash, "fields declared twice: %s" % ", ".join(sorted(clash))
        common = [field.with_default(defaults[name]) if name in defaults else field
                  for name, field in COMMON.items()]
        self.arch = arch
        self.fields = types.MappingProxyType({f.name: f for f in common + list(fields)})

    def defaults(self):
        """Read-only ``{field: default}`` of the optional, user-set fields."""
        return types.MappingProxyType({
            f.name: f.default for f in self.fields.values()
            if f.default is not REQUIRED and f.default is not DERIVED})

    @property
    def required(self):
        """The fields a config must set."""
        return tuple(f.name for f in self.fields.values() if f.default is REQUIRED)

    @property
    def derived(self):
        """The fields the zoo derives when it builds a model."""
        return tuple(f.name for f in self.fields.values() if f.default is DERIVED)

    def check_known(self, model, fields, where=""):
        """Reject a field this architecture does not have, suggesting the closest name."""
        for name in fields:
            if name not in self.fields:
                raise ConfigError(model, where + str(name), fields[name],
                                  self.unknown_phrase(name))

    def unknown_phrase(self, name):
        """What a :class:`zoo.ConfigError` says of the unknown field ``name``: that it is
        unknown (not what was expected, which read as if the field existed), and the closest
        known name, else all of them."""
        close = difflib.get_close_matches(str(name), list(self.fields), n=1, cutoff=0.6)
        if close:
            return "unknown config field; did you mean %s?" % close[0]
        return "unknown config field; arch %s has %s" % (self.arch, ", ".join(self.fields))

    def validate(self, config):
        """Check every field ``config`` sets, in declaration order; raise ConfigError."""
        self.check_known(model_name(config), config)
        for field in self.fields.values():
            field.check(config)

    def markdown(self):
        """The README table of this architecture's fields: name, default (as JSON/YAML
        writes it), description."""
        rows = ["| field | default | meaning |", "|---|---|---|"]
        for field in self.fields.values():
            default = ("required" if field.default is REQUIRED else "derived"
                       if field.default is DERIVED else "`%s`" % json.dumps(field.default))
            rows.append("| `%s` | %s | %s |" % (field.name, default, field.description))
        return "\n".join(rows)
