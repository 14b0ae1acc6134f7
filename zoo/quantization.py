"""Int8 quantization of a trained detector with MKL-DNN, calibrated on real images.

Convolutions and fully connected layers of the fused graph run in int8 (uint8
after a ReLU); each layer's output range comes from calibration batches,
either their observed min/max (``naive``) or the threshold that keeps the
int8 histogram closest to fp32's in KL divergence (``entropy``). Operators
with no int8 kernel (anchors, detection, proposals, ROIAlign) run in fp32.
"""
import json

import mxnet as mx
import numpy as np
from mxnet.contrib import quantization

from .data import DetectionLoader
from .deploy import MKLDNN, mkldnn_available
from .errors import OptionsError
from .evaluation import val_transform

CALIB_MODES = ("naive", "entropy")

FP32_OPERATORS = ("Flatten", "Concat", "transpose", "Reshape", "softmax")
"""Operators kept in fp32 in every model. The prediction heads' reshaping and
concatenation feed the fp32 detection operator: int8 versions would only add
a quantize/dequantize pair per head."""


def calibration_iter(model, dataset, batch_size=8, num_batches=5, num_workers=None):
    """The first ``num_batches`` batches of ``dataset`` (in order, validation transform) as an
    ``mx.io.NDArrayIter`` of the inference graph's inputs."""
    if len(dataset) < batch_size:
        raise ValueError("calibration needs at least one batch: %d images < batch size %d"
                         % (len(dataset), batch_size))
    loader = DetectionLoader(dataset, batch_size, val_transform(model), shuffle=False,
                             num_workers=num_workers)
    images = []
    for batch in loader.epoch(0):
        images.append(batch.data)
        if len(images) == num_batches:
            break
    inputs = model.input_arrays(np.concatenate(images))
    return mx.io.NDArrayIter({name: mx.nd.array(array) for name, array in inputs.items()},
                             batch_size=batch_size)


def quantize(symbol, arg_params, aux_params, calib_data, calib_mode="naive",
             excluded_layers=(), num_examples=None):
    """``(int8 symbol, arg_params, aux_params)`` of an inference graph.

    ``calib_data`` is an ``mx.io.DataIter`` of the graph's inputs (see
    :func:`calibration_iter`); ``excluded_layers`` are layer names to keep in
    fp32 besides :data:`FP32_OPERATORS`.
    """
    if calib_mode not in CALIB_MODES:
        raise OptionsError("calibration mode must be one of %s, not %r"
                         % (", ".join(CALIB_MODES), calib_mode))
    if not mkldnn_available():
        raise RuntimeError("int8 inference needs MXNet built with %s" % MKLDNN)
    layers = [node["name"] for node in json.loads(symbol.tojson())["nodes"]
              if node["op"] != "null"]
    unknown = [name for name in excluded_layers if name not in layers]
    if unknown:
        raise OptionsError("excluded layer %r is not in the graph (whose layers are %s, ...)"
                           % (unknown[0], ", ".join(layers[:5])))
    data_names = [desc.name for desc in calib_data.provide_data]
    return quantization.quantize_model_mkldnn(
        symbol, arg_params, aux_params, data_names=data_names, label_names=None,
        ctx=mx.cpu(), excluded_sym_names=list(excluded_layers),
        excluded_op_names=list(FP32_OPERATORS), calib_mode=calib_mode, calib_data=calib_data,
        num_calib_examples=num_examples, quantized_dtype="auto", quantize_mode="smart",
        quantize_granularity="channel-wise")


def int8_layers(symbol):
    """Names of the layers of a quantized graph that compute in int8."""
    nodes = json.loads(symbol.tojson())["nodes"]
    return [node["name"] for node in nodes
            if node.get("attrs", {}).get("quantized") == "true"
            or node["op"].startswith("_contrib_quantized_")]
