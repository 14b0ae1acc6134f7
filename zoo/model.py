"""The model object users get from ``zoo.get_model``: symbols, parameters, export."""
import mxnet as mx
import numpy as np

from symbols import backbones

from zoo import pretrained
from zoo.pretrained import maps
from zoo.config.loading import resolve
from zoo.config.registry import get_config
from zoo.architectures import ARCHITECTURES
from zoo.architectures.base import outputs_by_name
from zoo.schema.graph import BackboneGraph
from zoo.schema.preprocessing import canvas_im_info, input_size
from zoo.schema.checks import Checker

__all__ = ["DetectionModel", "build_model", "get_model"]


def build_model(config, pretrained_backbone=False, **overrides):
    """Validate ``config`` with ``overrides`` and build the model; ``config`` is a dict from
    ``load_config`` or a model's fully resolved ``config`` (derived fields included, as
    artifacts store it), which rebuilds the same model. ``config`` is never changed.

    Raises :class:`zoo.ConfigError` before any detector graph is built if the config is wrong.
    """
    spec = resolve(config, overrides)
    arch = ARCHITECTURES[spec["arch"]]
    try:
        backbone = backbones.get_backbone(spec["backbone"])
    except KeyError:
        Checker(spec).fail("backbone", spec["backbone"],
                           "one of %s" % ", ".join(sorted(backbones.BACKBONES)))
    height, width = arch.input_shapes(spec)["data"][2:]
    derived = arch.derive(spec, backbone, BackboneGraph(backbone.body(), height, width))
    model = DetectionModel(spec.merged(derived), backbone, arch)
    if pretrained_backbone:
        model.pretrained_path = pretrained.find_gluoncv_file(maps.gluoncv_name(backbone))
    return model


class DetectionModel:
    """A validated detector: its config, graphs, parameters and export.

    ``spec`` is a resolved :class:`zoo.config.loading.ModelSpec` with the architecture's derived
    fields, ``arch`` its :class:`zoo.architectures.Architecture`."""

    def __init__(self, spec, backbone, arch):
        self._spec = spec
        self.backbone = backbone
        self.arch = arch
        self.pretrained_path = None
        self.arg_params, self.aux_params = None, None
        self._train_outputs = None
        self._num_params = None

    def __repr__(self):
        """One line: name, classes, input size, parameters (``print(zoo.get_model(...))``)."""
        return "<DetectionModel %s: %d classes, input %s, %s parameters>" % (
            self.name, self._spec["num_classes"], input_size(self.preprocessing()),
            "{:,}".format(self.num_params()))

    @property
    def config(self):
        """The resolved config as a plain dict (a copy): defaults, shape section, overrides
        and derived fields applied. ``build_model(model.config)`` rebuilds this model."""
        return self._spec.to_dict()

    @property
    def spec(self):
        """The resolved config as a read-only :class:`zoo.config.loading.ModelSpec`."""
        return self._spec

    @property
    def name(self):
        return self._spec["name"]

    def input_shapes(self, batch_size=1):
        """Shapes of the inference graph's inputs (``data``, and ``im_info`` for Faster R-CNN)."""
        return self.arch.input_shapes(self._spec, batch_size)

    def input_arrays(self, data, im_info=None):
        """The inference and training graphs' inputs for a batch of images ``data``
        ``(B, 3, H, W)``: ``data`` and, for Faster R-CNN, ``im_info`` ``(B, 3)`` rows
        ``[height, width, scale]`` of each image's valid region: the given one (a padded
        batch's, :attr:`zoo.data.Batch.im_info`), else the whole canvas at scale 1."""
        arrays = {"data": data}
        if "im_info" in self.input_shapes():
            arrays["im_info"] = canvas_im_info(data) if im_info is None else im_info
        return arrays

    def train_input_shapes(self, batch_size=1, max_objects=32):
        """Shapes of the training graph's inputs, ``label`` included."""
        return self.arch.train_input_shapes(self._spec, batch_size, max_objects)

    def symbol(self):
        """Inference graph: inputs to detections ``(B, N, 6)``."""
        return self.arch.inference_symbol(self.backbone, self._spec)

    def train_symbol(self, with_detections=False):
        """Training graph: inputs and ``label`` to named outputs (see :meth:`training_losses`).
        ``with_detections`` (SSD only) adds an output of the batch's detections, without
        gradient, for a metric: training leaves it out, decoding and NMS cost time."""
        if not with_detections:
            return self.arch.training_symbol(self.backbone, self._spec)
        if self.arch.name != "ssd":
            raise ValueError("%s: only an SSD training graph can output detections, this is %s"
                             % (self.name, self.arch.name))
        return self.arch.training_symbol(self.backbone, self._spec, with_detections=True)

    @property
    def loss_names(self):
        """The keys of :meth:`training_losses`, in display order."""
        return tuple(self.arch.loss_names)

    def training_losses(self, outputs):
        """``{loss name: float}`` from ``outputs``, the arrays a forward pass of
        :meth:`train_symbol` returns in its order (``module.get_outputs()``); each is
        picked by its output's name."""
        return self.arch.training_losses(self._named_training_outputs(outputs))

    def positive_anchors(self, outputs):
        """How many anchors the training targets matched to an object in a forward pass of
        :meth:`train_symbol` (``outputs`` in its order, as :meth:`training_losses` takes
        them); None where the architecture does not say."""
        return self.arch.positive_anchors(self._named_training_outputs(outputs))

    def _named_training_outputs(self, outputs):
        """A training forward pass's ``outputs`` keyed by operator name."""
        if self._train_outputs is None:  # building the graph per batch would cost more
            self._train_outputs = tuple(self.train_symbol().list_outputs())
        return outputs_by_name(self._train_outputs, outputs)

    def preprocessing(self):
        """``{"mean", "std", "resize", "data_shape": [H, W], ...}``
        (:mod:`zoo.schema.preprocessing`): how an image becomes this model's input; the one source
        for transforms, detector and artifact."""
        return self.arch.preprocessing(self._spec)

    def anchor_maps(self):
        """``(maps, iou)``: each feature map's anchors in input pixels
        (:class:`zoo.schema.anchors.AnchorMap`) and the IoU at which one matches a box in
        training; None where the architecture does not say."""
        return self.arch.anchor_maps(self._spec, self.backbone)

    def with_fitted_anchors(self, sides):
        """This model rebuilt with anchors fitted to boxes of ``sides`` (``(N, 2)`` input
        pixels; :mod:`zoo.schema.anchors`), its graph's shapes unchanged; None where the
        architecture's anchors cannot be fitted."""
        fields = self.arch.fitted_anchors(self._spec, self.backbone, sides)
        if fields is None:
            return None
        model = build_model(self.config, **fields)
        model.pretrained_path = self.pretrained_path
        return model

    def describe(self):
        """``(feature maps, anchor count)`` as the checker table shows them."""
        return self.arch.describe(self._spec, self.backbone)

    def param_shapes(self):
        """``(arg_shapes, aux_shapes)``: trainable and auxiliary (BN statistics) by name."""
        sym = self.symbol()
        inputs = self.input_shapes()
        arg_shapes, _, aux_shapes = sym.infer_shape(**inputs)
        args = {n: tuple(s) for n, s in zip(sym.list_arguments(), arg_shapes) if n not in inputs}
        aux = {n: tuple(s) for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
        return args, aux

    def num_params(self):
        """Number of trainable parameters (batch-norm running statistics excluded)."""
        if self._num_params is None:  # the graph's shape inference: some 0.1-0.3 s a call
            self._num_params = sum(int(np.prod(shape))
                                   for shape in self.param_shapes()[0].values())
        return self._num_params

    def init_params(self, ctx=None, seed=None):
        """Initialise every parameter (Xavier for weights) and, if the model was built with
        ``pretrained_backbone=True``, overwrite the backbone's with GluonCV's ImageNet weights.

        Returns ``(arg_params, aux_params)`` and keeps them on the model.
        """
        ctx = ctx or mx.cpu()
        if seed is not None:
            mx.random.seed(seed)
            np.random.seed(seed)
        arg_shapes, aux_shapes = self.param_shapes()
        initializer = mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)
        attrs = self.symbol().attr_dict()
        self.arg_params, self.aux_params = {}, {}
        for name, shape in arg_shapes.items():
            array = mx.nd.zeros(shape, ctx=ctx)
            initializer(mx.init.InitDesc(name, attrs.get(name, {})), array)
            self.arg_params[name] = array
        for name, shape in aux_shapes.items():
            array = mx.nd.zeros(shape, ctx=ctx)
            initializer(mx.init.InitDesc(name, attrs.get(name, {})), array)
            self.aux_params[name] = array
        if self.pretrained_path:
            args, aux = pretrained.import_gluoncv_params(self.backbone, self.pretrained_path,
                                                         arg_shapes, aux_shapes)
            self.arg_params.update({k: v.as_in_context(ctx) for k, v in args.items()})
            self.aux_params.update({k: v.as_in_context(ctx) for k, v in aux.items()})
        return self.arg_params, self.aux_params


def get_model(name, pretrained_backbone=False, **overrides):
    """A registered model with any config field overridden, e.g. ``num_classes=3``."""
    return build_model(get_config(name), pretrained_backbone=pretrained_backbone, **overrides)
