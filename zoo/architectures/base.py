"""The contract every detector architecture implements.

An :class:`Architecture` knows one detector family's config fields (its
:class:`zoo.schema.fields.Schema`: types, ranges, defaults) and how they relate,
validates a resolved config against the backbone graph and derives the
fields the graph builders need, maps config fields to the builders'
explicit arguments, and turns the training graph's named outputs into losses.
It holds no state but its name: :data:`zoo.architectures.ARCHITECTURES` keeps one instance per
``arch`` name.
"""
import abc

from zoo.schema import preprocessing as image_preprocessing

__all__ = ["Architecture", "output_name", "outputs_by_name"]

OUTPUT_SUFFIX = "_output"


class Architecture(abc.ABC):
    """One detector family. Methods take a resolved :class:`zoo.config.loading.ModelSpec` (``spec``)
    and never change it; ``derive`` returns new fields that the caller merges into a new
    spec."""

    def __init__(self, name):
        self.name = name
        """The ``arch`` value of configs of this family (a key of ``symbols.FACTORIES``)."""

    recipe_lr = None
    """``(lr, total batch)``: this family's SGD learning rate at that total batch (samples
    per update, over devices and dist_sync workers). A run given no lr takes it scaled
    linearly to its own total batch (Goyal et al. 2017; MMDetection's ``--auto-scale-lr``):
    see :func:`zoo.jobs.train.learning_rate`. The losses are normalised as GluonCV's and the
    papers' (per positive anchor for SSD, per sampled anchor and ROI for Faster R-CNN), so
    an lr from either means the same here."""

    recipe_warmup = 0
    """Updates over which this family's recipe warms its lr up linearly (0: none). A run
    given neither an lr nor a warm-up takes it with the recipe lr, at most half of its own
    updates: see :func:`zoo.jobs.train.warm_up`."""

    prediction_params = None
    """Regular expression of the parameters of the layers that output the class scores and
    box offsets (every stage's). Zeroed, they make the trivial predictor (equal class scores,
    zero box offsets) whose loss the training-health check judges the first loss against
    (:mod:`zoo.engine.health.loss`)."""

    class_layers = ()
    """``(name pattern, rows per class)`` of each class-dependent array, which fine-tuning
    takes class by class (:mod:`zoo.engine.finetune`). Its axis 0 is ``(groups, classes + 1,
    rows per class)``, background first: SSD's class heads have one group per anchor of a
    cell, Faster R-CNN's predictors one, its box deltas four rows a class."""

    @property
    @abc.abstractmethod
    def schema(self):
        """The :class:`zoo.schema.fields.Schema` declaring this family's config fields."""

    @property
    def defaults(self):
        """Read-only mapping of field defaults, from :attr:`schema`."""
        return self.schema.defaults()

    @property
    def required(self):
        """Tuple of the fields a config must set, from :attr:`schema`."""
        return self.schema.required

    def check_fields(self, spec):
        """Checks relating ``spec``'s fields to each other, after :attr:`schema` validated
        each field and before any graph is built. Raises :class:`zoo.ConfigError`."""

    @property
    @abc.abstractmethod
    def output_names(self):
        """Tuple of the training graph's output operator names, in the graph's order."""

    @property
    @abc.abstractmethod
    def loss_names(self):
        """Tuple of the keys :meth:`training_losses` returns, in display order."""

    @abc.abstractmethod
    def derive(self, spec, backbone, graph):
        """Validate ``spec`` against the backbone and its :class:`zoo.schema.graph.BackboneGraph`;
        return a new dict of the derived fields the builders need. Raises
        :class:`zoo.ConfigError`."""

    def preprocessing(self, spec):
        """How an image becomes this family's input (:mod:`zoo.schema.preprocessing`): by default
        stretched to a square ``data_shape``."""
        return image_preprocessing.stretch(spec)

    @abc.abstractmethod
    def input_shapes(self, spec, batch_size=1):
        """Shapes of the inference graph's inputs by name."""

    def train_input_shapes(self, spec, batch_size=1, max_objects=32):
        """Shapes of the training graph's inputs by name: the inference inputs and ``label``
        ``(B, max_objects, 6)``, rows ``[class, x1, y1, x2, y2, difficult]`` padded with -1
        as the data loader gives them to every architecture."""
        return dict(self.input_shapes(spec, batch_size), label=(batch_size, max_objects, 6))

    @abc.abstractmethod
    def inference_symbol(self, backbone, spec):
        """Inputs to detections ``(B, N, 6)`` rows ``[class, score, x1, y1, x2, y2]``."""

    @abc.abstractmethod
    def training_symbol(self, backbone, spec):
        """Inputs and ``label`` to the named training outputs (see :func:`output_name`)."""

    @abc.abstractmethod
    def training_losses(self, named_outputs):
        """``{loss name: float}`` from the training graph's outputs keyed by operator name
        (:func:`outputs_by_name`)."""

    def positive_anchors(self, named_outputs):
        """How many anchors a batch's training targets matched to an object, from the
        training graph's outputs keyed by operator name; None where the family does not
        output its targets. Zero on a batch with objects means the boxes never reach the
        loss."""
        return None

    def anchor_maps(self, spec, backbone):
        """``(maps, iou)``: the anchors of each feature map
        (:class:`zoo.schema.anchors.AnchorMap`, input pixels) and the IoU at which an anchor
        matches a box in training; None where the family does not say (the data census then
        leaves the anchors out)."""
        return None

    def fitted_anchors(self, spec, backbone, sides):
        """The config fields (``{field: value}``) of anchors fitted to boxes of ``sides``
        (``(N, 2)`` input pixels, :mod:`zoo.schema.anchors`), the graph's shapes kept; None
        where the family's anchors cannot be fitted."""
        return None

    @abc.abstractmethod
    def describe(self, spec, backbone):
        """``(feature maps, anchor count)`` as the checker table shows them."""


def output_name(symbol_output):
    """The operator name of one of ``Symbol.list_outputs()``'s entries (``loc_loss_output``
    is ``loc_loss``)."""
    if symbol_output.endswith(OUTPUT_SUFFIX):
        return symbol_output[:-len(OUTPUT_SUFFIX)]
    return symbol_output


def outputs_by_name(names, outputs):
    """``{operator name: output}`` pairing ``names`` (``Symbol.list_outputs()``) with the
    arrays a forward pass returned in that order."""
    outputs = list(outputs)
    if len(outputs) != len(names):
        raise ValueError("%d outputs for a graph with %d (%s)"
                         % (len(outputs), len(names), ", ".join(names)))
    return {output_name(name): output for name, output in zip(names, outputs)}
