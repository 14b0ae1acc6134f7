"""Validation of SSD configs from the backbone graph, before any model is built.

Every check raises :class:`zoo.ConfigError` with one line naming the model, the
field and the offending value, and saying what was expected.
"""
import difflib
import numbers

from .errors import ConfigError

PER_FEATURE_FIELDS = ("from_layers", "num_filters", "strides", "pads", "sizes", "ratios",
                      "normalizations")
MAX_ANCHOR_SIZE = 1.2


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


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


def check_fields(config):
    """Types, list lengths and value ranges; independent of the graph."""
    check = Checker(config)
    num_classes = config["num_classes"]
    check.require(_is_int(num_classes) and num_classes >= 1, "num_classes", num_classes,
                  "a positive integer")
    names = config.get("class_names")
    check.require(names is None or (isinstance(names, list) and len(names) == num_classes),
                  "class_names", names, "null or a list of num_classes=%s names" % num_classes)
    for field in PER_FEATURE_FIELDS:
        check.require(isinstance(config[field], list) and config[field], field, config[field],
                      "a non-empty list with one entry per feature map")
    count = len(config["from_layers"])
    fields = PER_FEATURE_FIELDS + (("steps",) if config.get("steps") is not None else ())
    for field in fields:
        check.require(isinstance(config[field], list) and len(config[field]) == count, field,
                      config[field], "%d entries, one per from_layers entry" % count)
    check.require(isinstance(config["from_layers"][0], str) and config["from_layers"][0],
                  "from_layers[0]", config["from_layers"][0],
                  "a backbone layer: extra layers need a feature map to start from")
    for i, layer in enumerate(config["from_layers"]):
        at = "[%d]" % i
        check.require(isinstance(layer, str), "from_layers" + at, layer,
                      "a backbone layer name or '' for an extra layer")
        filters, stride, pad = (config[f][i] for f in ("num_filters", "strides", "pads"))
        if layer:
            check.require(_is_int(filters) and (filters == -1 or filters > 0), "num_filters" + at,
                          filters, "-1 (use the backbone layer as is) or a positive width")
            check.require(stride == -1, "strides" + at, stride, "-1 for a backbone layer")
            check.require(pad == -1, "pads" + at, pad, "-1 for a backbone layer")
        else:
            check.require(_is_int(filters) and filters >= 2, "num_filters" + at, filters,
                          "an integer >= 2 for an extra layer")
            check.require(_is_int(stride) and stride >= 1, "strides" + at, stride,
                          "an integer >= 1 for an extra layer")
            check.require(_is_int(pad) and pad >= 0, "pads" + at, pad,
                          "an integer >= 0 for an extra layer")
        norm = config["normalizations"][i]
        check.require(_is_number(norm) and (norm == -1 or norm > 0), "normalizations" + at, norm,
                      "-1 (none) or a positive initial L2-norm scale")
        _check_anchor_shapes(check, config["sizes"][i], config["ratios"][i], at)
        if config.get("steps") is not None:
            step = config["steps"][i]
            check.require(_is_number(step) and (step == -1 or step > 0), "steps" + at, step,
                          "-1 (derive from the feature size) or a positive step in pixels")
    smallest = [min(sizes) for sizes in config["sizes"]]
    for i in range(1, count):
        check.require(smallest[i] >= smallest[i - 1], "sizes[%d]" % i, config["sizes"][i],
                      "anchor sizes that do not shrink on coarser maps (previous smallest %g)"
                      % smallest[i - 1])


def _check_anchor_shapes(check, sizes, ratios, at):
    check.require(isinstance(sizes, list) and sizes and all(
        _is_number(s) and 0 < s <= MAX_ANCHOR_SIZE for s in sizes), "sizes" + at, sizes,
        "a non-empty list of sizes in (0, %g], as fractions of the image side" % MAX_ANCHOR_SIZE)
    check.require(isinstance(ratios, list) and ratios and all(
        _is_number(r) and 0.05 <= r <= 20 for r in ratios), "ratios" + at, ratios,
        "a non-empty list of aspect ratios in [0.05, 20]")
    check.require(len(set(ratios)) == len(ratios), "ratios" + at, ratios, "no repeated ratio")


def resolve_layer(check, backbone, graph, field, name):
    """The layer name for a ``from_layers`` entry: a declared stage or an internal layer."""
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


def check_feature_maps(config, sizes):
    """Feature maps must shrink strictly and anchor steps must tile the image."""
    check = Checker(config)
    data_shape = config["data_shape"]
    for i in range(1, len(sizes)):
        check.require(sizes[i] < sizes[i - 1], "from_layers[%d]" % i, config["from_layers"][i],
                      "a feature map smaller than the previous one (%dx%d), got %dx%d at data "
                      "shape %d: strides must grow strictly"
                      % (sizes[i - 1], sizes[i - 1], sizes[i], sizes[i], data_shape))
    steps = config.get("steps")
    if steps is None:
        return [-1] * len(sizes)
    for i, (step, size) in enumerate(zip(steps, sizes)):
        if step > 0:
            check.require(abs(step * size - data_shape) < step, "steps[%d]" % i, step,
                          "a step that tiles the %dx%d map over the %d-pixel image (about %.1f)"
                          % (size, size, data_shape, data_shape / size))
    return steps

