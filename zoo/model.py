"""The model object users get from ``zoo.get_model``: symbols, parameters, export."""
import copy

import mxnet as mx
import numpy as np

from . import modeling

from . import deploy, pretrained
from .config import resolve
from .detectors import ARCHITECTURES
from .graph import BackboneGraph
from .validate import Checker


def build_model(config, pretrained_backbone=False, **overrides):
    """Validate ``config`` (a dict from ``load_config``) with ``overrides`` and build the model.

    Raises :class:`zoo.ConfigError` before any detector graph is built if the config is wrong.
    """
    resolved = resolve(config, overrides)
    arch = ARCHITECTURES[resolved["arch"]]
    try:
        backbone = modeling.get_backbone(resolved["backbone"])
    except KeyError:
        Checker(resolved).fail("backbone", resolved["backbone"],
                               "one of %s" % ", ".join(sorted(modeling.BACKBONES)))
    height, width = arch.input_shapes(resolved)["data"][2:]
    arch.prepare(resolved, backbone, BackboneGraph(backbone.body(), height, width))
    model = DetectionModel(resolved, backbone, arch)
    if pretrained_backbone:
        model.pretrained_path = pretrained.find_gluoncv_file(backbone.gluoncv_name)
    return model


class DetectionModel:
    """A validated detector: its config, graphs, parameters and export."""

    def __init__(self, config, backbone, arch):
        self._config = config
        self.backbone = backbone
        self.arch = arch
        self.pretrained_path = None
        self.arg_params, self.aux_params = None, None

    @property
    def config(self):
        """A copy of the resolved config (defaults, shape section and overrides applied)."""
        return copy.deepcopy(self._config)

    @property
    def name(self):
        return self._config["name"]

    def input_shapes(self, batch_size=1):
        """Shapes of the inference graph's inputs (``data``, and ``im_info`` for Faster R-CNN)."""
        return self.arch.input_shapes(self._config, batch_size)

    def input_arrays(self, data):
        """The inference and training graphs' inputs for a batch of images ``data``
        ``(B, 3, H, W)``: ``data`` and, for Faster R-CNN, ``im_info`` marking each whole
        image as valid."""
        arrays = {"data": data}
        if "im_info" in self.input_shapes():
            height, width = data.shape[2:]
            arrays["im_info"] = np.tile(np.array([[height, width, 1.0]], np.float32),
                                        (data.shape[0], 1))
        return arrays

    def train_input_shapes(self, batch_size=1, max_objects=32):
        """Shapes of the training graph's inputs, ``label`` included."""
        return self.arch.train_input_shapes(self._config, batch_size, max_objects)

    def symbol(self):
        """Inference graph: inputs to detections ``(B, N, 6)``."""
        return self.arch.symbols.inference_symbol(self.backbone, self._config)

    def train_symbol(self):
        """Training graph: inputs and ``label`` to the losses."""
        return self.arch.symbols.training_symbol(self.backbone, self._config)

    def describe(self):
        """``(feature maps, anchor count)`` as the checker table shows them."""
        return self.arch.describe(self._config, self.backbone)

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
        return sum(int(np.prod(shape)) for shape in self.param_shapes()[0].values())

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

    def export(self, prefix, epoch=0, fused=True):
        """Write ``prefix-symbol.json`` (inference graph) and ``prefix-%04d.params`` in MXNet's
        checkpoint format; initialises parameters first if none are set.

        ``fused`` writes the graph with MKL-DNN's fused operators (see :mod:`zoo.deploy`),
        which loads only in MXNet builds with MKL-DNN; ``fused=False`` writes the portable
        graph (e.g. for GPUs)."""
        if self.arg_params is None:
            self.init_params()
        symbol = deploy.fuse(self.symbol()) if fused else self.symbol()
        mx.model.save_checkpoint(prefix, epoch, symbol, self.arg_params, self.aux_params,
                                 remove_amp_cast=False)
        return "%s-symbol.json" % prefix, "%s-%04d.params" % (prefix, epoch)
