"""Checks shared by every detector's config validation.

Every check raises :class:`zoo.ConfigError` with one line naming the model, the
field and the offending value, and saying what was expected. A tapped backbone
layer is proved from the graph: it exists, lies on the trunk and is the
deepest layer at its resolution.
"""
import difflib
import math
import numbers

from zoo.errors import ConfigError

__all__ = ["Checker", "check_backbone_layer", "is_int", "is_number", "repeated"]


def is_number(value):
    """Whether ``value`` is a finite real number (booleans, NaN and infinities are not): the
    check for config fields and for numbers read from annotation files alike."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and math.isfinite(value)


def is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def repeated(values):
    """The values ``values`` holds more than once, each once, in the order they first
    repeat: what a class list must not have (two classes of one name cannot be told apart
    by name, in a dataset's labels or a detection's)."""
    seen, found = set(), {}
    for value in values:
        if value in seen:
            found[value] = None
        seen.add(value)
    return list(found)


class Checker:
    """Raises ConfigError for ``config``; keeps the model name for the messages."""

    def __init__(self, config):
        self.config = config
        self.model = config.get("name", "<unnamed>")

    def fail(self, field, value, expected):
        raise ConfigError(self.model, field, value, expected)

    def require(self, condition, field, value, expected):
        if not condition:
            self.fail(field, value, expected)


def resolve_layer(check, backbone, graph, field, name):
    """The layer name for a config entry naming a declared stage or an internal layer."""
    stages = backbone.output_shape()
    if name in stages:
        return stages[name].layer
    if graph.has_layer(name):
        return name
    close = difflib.get_close_matches(name, list(stages) + list(graph.shapes), n=3)
    check.fail(field, name, "a layer of %s: a stage (%s) or an internal layer%s"
               % (backbone.name, ", ".join(stages),
                  "; did you mean %s?" % ", ".join(close) if close else ""))


def check_backbone_layer(check, backbone, graph, field, name):
    """Prove that the tapped layer is the last layer of its stage; return its layer name."""
    layer = resolve_layer(check, backbone, graph, field, name)
    height, width = graph.spatial(layer)
    deeper = graph.deeper_at_same_resolution(layer)
    if deeper is not None:
        check.fail(field, name, "the deepest layer at its %dx%d resolution, but %s comes later at "
                   "the same size and everything after it would be dropped; use %s"
                   % (height, width, deeper, _stage_hint(backbone, graph, deeper)))
    if layer not in graph.trunk:
        check.fail(field, name, "a layer every path through %s passes (the end of a stage); it "
                   "is inside a block whose other branches it skips" % backbone.name)
    stage = backbone.output_shape().get(name)
    if stage is not None:
        actual = (graph.stride(layer), graph.channels(layer))
        check.require(actual == (stage.stride, stage.channels), field, name,
                      "stride %d and %d channels as %s declares, but the graph gives stride %d "
                      "and %d channels" % ((stage.stride, stage.channels, backbone.name) + actual))
    return layer


def _stage_hint(backbone, graph, layer):
    for stage in backbone.stages():
        if stage.layer == layer:
            return "stage '%s' (layer %s)" % (stage.name, layer)
    return "layer '%s'" % layer
