"""The model object users get from ``zoo.get_model``: symbols, parameters, export."""
import copy

import mxnet as mx
import numpy as np

import symbols
from symbols import ssd

from . import pretrained
from .config import resolve
from .errors import ConfigError
from .graph import BackboneGraph
from .validate import Checker, check_backbone_layer, check_feature_maps, check_fields

ARCHITECTURES = {"ssd": ssd}


def build_model(config, pretrained_backbone=False, **overrides):
    """Validate ``config`` (a dict from ``load_config``) with ``overrides`` and build the model.

    Raises :class:`zoo.ConfigError` before any model graph is built if the config is wrong.
    """
    resolved = resolve(config, overrides)
    check_fields(resolved)
    check = Checker(resolved)
    try:
        backbone = symbols.get_backbone(resolved["backbone"])
    except KeyError:
        check.fail("backbone", resolved["backbone"],
                   "one of %s" % ", ".join(sorted(symbols.BACKBONES)))
    graph = BackboneGraph(backbone.body(), resolved["data_shape"])
    layers = []
    for i, name in enumerate(resolved["from_layers"]):
        if name:
            layers.append(check_backbone_layer(check, backbone, graph, "from_layers[%d]" % i, name))
        else:
            layers.append("")
    resolved["feature_layers"] = layers
    model = DetectionModel(resolved, backbone, pretrained_backbone)
    shapes = model.feature_shapes()
    resolved["feature_channels"] = [shape[1] for shape in shapes]
    resolved["steps"] = check_feature_maps(resolved, [shape[2] for shape in shapes])
    if pretrained_backbone:
        model.pretrained_path = pretrained.find_gluoncv_file(backbone.gluoncv_name)
    return model


class DetectionModel:
    """A validated detector: its config, graphs, parameters and export."""

    def __init__(self, config, backbone, pretrained_backbone=False):
        self._config = config
        self.backbone = backbone
        self.arch = ARCHITECTURES[config["arch"]]
        self.pretrained_path = None
        self.arg_params, self.aux_params = None, None

    @property
    def config(self):
        """A copy of the resolved config (defaults, shape section and overrides applied)."""
        return copy.deepcopy(self._config)

    @property
    def name(self):
        return self._config["name"]

    def data_shapes(self, batch_size=1):
        side = self._config["data_shape"]
        return {"data": (batch_size, 3, side, side)}

    def feature_shapes(self):
        """``(C, H, W)``-style shapes ``(1, C, H, W)`` of the maps the heads see."""
        body = self.backbone.body()
        c = self._config
        features = ssd.multi_scale_features(body, c["feature_layers"], c["num_filters"],
                                            c["strides"], c["pads"], c["extra_use_bn"])
        grouped = mx.sym.Group(features)
        _, out_shapes, _ = grouped.infer_shape(**self.data_shapes())
        return [tuple(shape) for shape in out_shapes]

    def symbol(self):
        """Inference graph: ``data`` to detections ``(B, N, 6)``."""
        return self.arch.inference_symbol(self.backbone, self._config)

    def train_symbol(self):
        """Training graph on ``data`` and ``label``."""
        return self.arch.training_symbol(self.backbone, self._config)

    def param_shapes(self):
        """``(arg_shapes, aux_shapes)``: trainable and auxiliary (BN statistics) by name."""
        sym = self.symbol()
        arg_shapes, _, aux_shapes = sym.infer_shape(**self.data_shapes())
        args = {n: tuple(s) for n, s in zip(sym.list_arguments(), arg_shapes) if n != "data"}
        aux = {n: tuple(s) for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
        return args, aux

    def num_params(self):
        """Number of trainable parameters (batch-norm running statistics excluded)."""
        return sum(int(np.prod(shape)) for shape in self.param_shapes()[0].values())

    def num_anchors(self):
        _, out_shapes, _ = ssd.predictions(self.backbone, self._config)[2].infer_shape(
            **self.data_shapes())
        return out_shapes[0][1]

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

    def export(self, prefix, epoch=0):
        """Write ``prefix-symbol.json`` (inference graph) and ``prefix-%04d.params`` in MXNet's
        checkpoint format; initialises parameters first if none are set."""
        if self.arg_params is None:
            self.init_params()
        mx.model.save_checkpoint(prefix, epoch, self.symbol(), self.arg_params, self.aux_params,
                                 remove_amp_cast=False)
        return "%s-symbol.json" % prefix, "%s-%04d.params" % (prefix, epoch)
