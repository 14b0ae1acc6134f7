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

from zoo.inference.runner import BatchRunner, DatasetImages
from zoo.predictor import MKLDNN, Predictor, mkldnn_available
from zoo.choices import CALIB_MODES, COLLECTORS
from zoo.errors import OptionsError

__all__ = ["Histograms", "InputBatches", "MKLDNN_QUANTIZE", "STATISTICS", "calibration_iter",
           "calibration_thresholds", "int8_layers", "quantize"]

MKLDNN_QUANTIZE = "MKLDNN_QUANTIZE"
"""The subgraph backend of MKL-DNN's quantization flow: fusion before and after
quantizing, as ``quantize_model_mkldnn`` applies it."""

QUANTIZE_SETTINGS = dict(quantized_dtype="auto", quantize_mode="smart",
                         quantize_granularity="channel-wise")

FP32_OPERATORS = ("Flatten", "Concat", "transpose", "Reshape", "softmax")
"""Operators kept in fp32 in every model. The prediction heads' reshaping and
concatenation feed the fp32 detection operator: int8 versions would only add
a quantize/dequantize pair per head."""


def calibration_iter(model, dataset, batch_size=8, num_batches=5, num_workers=None,
                     preprocessing=None):
    """The first ``num_batches`` batches of ``dataset`` (in order, made into inputs as
    ``preprocessing`` says, by default the model's; pass an artifact's) as an
    ``mx.io.DataIter`` of the inference graph's inputs, prepared by the one batch runner
    (:class:`zoo.inference.runner.BatchRunner`): images of one input shape (Faster R-CNN's
    short-side resize) share a batch, each batch with its own shape and ``im_info``."""
    if len(dataset) < batch_size:
        raise ValueError("calibration needs at least one batch: %d images < batch size %d"
                         % (len(dataset), batch_size))
    runner = BatchRunner(preprocessing or model.preprocessing(), workers=num_workers)
    batches = []
    for batch in runner.batches(DatasetImages(dataset), batch_size):
        batches.append(model.input_arrays(batch.data, batch.im_info))
        if len(batches) == num_batches:
            break
    return InputBatches(batches, batch_size)


class InputBatches(mx.io.DataIter):
    """Batches of a graph's inputs (dicts of name to numpy array), each of its own shapes,
    as an ``mx.io.DataIter`` whose ``provide_data`` is the first batch's."""

    def __init__(self, batches, batch_size):
        super().__init__(batch_size)
        self.batches = batches
        self.provide_data = self.descriptions(batches[0])
        self.provide_label = []
        self.position = 0

    @staticmethod
    def descriptions(inputs):
        return [mx.io.DataDesc(name, array.shape) for name, array in inputs.items()]

    def reset(self):
        self.position = 0

    def next(self):
        if self.position == len(self.batches):
            raise StopIteration
        inputs = self.batches[self.position]
        self.position += 1
        return mx.io.DataBatch([mx.nd.array(array) for array in inputs.values()], pad=0,
                               provide_data=self.descriptions(inputs))


def quantize(symbol, arg_params, aux_params, calib_data, calib_mode="naive",
             excluded_layers=(), num_examples=None, collector="outputs"):
    """``(int8 symbol, arg_params, aux_params)`` of an inference graph.

    ``calib_data`` is an ``mx.io.DataIter`` of the graph's inputs (see
    :func:`calibration_iter`); ``excluded_layers`` are layer names to keep in
    fp32 besides :data:`FP32_OPERATORS`; ``num_examples`` (None: all) stops calibration
    after the batch that reaches it; ``collector`` is one of :data:`~zoo.choices.COLLECTORS`.
    """
    check_options(symbol, calib_mode, excluded_layers, collector)
    excluded = dict(excluded_sym_names=list(excluded_layers),
                    excluded_op_names=list(FP32_OPERATORS))
    if collector == "monitor":
        data_names = [desc.name for desc in calib_data.provide_data]
        return quantization.quantize_model_mkldnn(
            symbol, arg_params, aux_params, data_names=data_names, label_names=None,
            ctx=mx.cpu(), calib_mode=calib_mode, calib_data=calib_data,
            num_calib_examples=num_examples, **excluded, **QUANTIZE_SETTINGS)
    # What quantize_model_mkldnn does, with the statistics computed by one executor.
    fused = symbol.get_backend_symbol(MKLDNN_QUANTIZE)
    int8, _, _, mxnet_collector = quantization.quantize_graph(
        fused, arg_params, aux_params, ctx=mx.cpu(), calib_mode=calib_mode, **excluded,
        **QUANTIZE_SETTINGS)
    # The layer outputs the int8 graph needs thresholds for.
    statistics = STATISTICS[calib_mode](mxnet_collector.include_layer)
    input_shapes = {desc.name: desc.shape for desc in calib_data.provide_data}
    for outputs in forward_batches(statistics.symbol(fused, input_shapes), arg_params,
                                   aux_params, calib_data, num_examples):
        statistics.add(outputs)
    int8, q_args, q_aux = quantization.calib_graph(
        int8, arg_params, aux_params, statistics, calib_mode,
        quantized_dtype=QUANTIZE_SETTINGS["quantized_dtype"], logger=None)
    return int8.get_backend_symbol(MKLDNN_QUANTIZE), q_args, q_aux


def check_options(symbol, calib_mode, excluded_layers, collector):
    """One-line errors for a calibration mode, excluded layer or collector that cannot be."""
    if calib_mode not in CALIB_MODES:
        raise OptionsError("calibration mode must be one of %s, not %r"
                           % (", ".join(CALIB_MODES), calib_mode))
    if collector not in COLLECTORS:
        raise OptionsError("calibration collector must be one of %s, not %r"
                           % (", ".join(COLLECTORS), collector))
    if not mkldnn_available():
        raise RuntimeError("int8 inference needs MXNet built with %s" % MKLDNN)
    layers = [node["name"] for node in json.loads(symbol.tojson())["nodes"]
              if node["op"] != "null"]
    unknown = [name for name in excluded_layers if name not in layers]
    if unknown:
        raise OptionsError("excluded layer %r is not in the graph (whose layers are %s, ...)"
                           % (unknown[0], ", ".join(layers[:5])))


def forward_batches(symbol, arg_params, aux_params, calib_data, num_examples=None):
    """``{output name: NDArray}`` of ``symbol`` for each batch of ``calib_data``, as many
    batches as MXNet's collector takes: all, or up to the one that reaches ``num_examples``."""
    predictor = Predictor(symbol, arg_params, aux_params)
    input_names = [desc.name for desc in calib_data.provide_data]
    seen = 0
    for batch in calib_data:
        inputs = dict(zip(input_names, batch.data))
        outputs = predictor(**{name: inputs[name] for name in predictor.input_names})
        yield dict(zip(symbol.list_outputs(), outputs))
        seen += calib_data.batch_size
        if num_examples is not None and seen >= num_examples:
            break


class MinMax:
    """Each calibrated layer's observed min and max over the batches (``naive``), kept
    where MXNet's collector keeps them (``min_max_dict``) for ``calib_graph``.

    The graph reduces each layer's output as it runs, so no output is copied out and the
    executor reuses memory as in plain inference. A 4-d output's max is MKL-DNN's global
    max pooling (per channel, read in its blocked layout, several times faster than
    MXNet's ``max``, which first reorders it); its min is minus the max of its negation.
    Both are exact: the last reduction, over channels, is numpy's.
    """

    def __init__(self, layers):
        self.layers = layers
        self.min_max_dict = {}

    def symbol(self, fused, input_shapes):
        internals = fused.get_internals()
        shapes = dict(zip(internals.list_outputs(), internals.infer_shape(**input_shapes)[1]))
        return mx.sym.Group([
            reduction for layer in self.layers for reduction in (
                channel_max(internals[layer], len(shapes[layer]), layer + "_max"),
                channel_max(mx.sym.negative(internals[layer]), len(shapes[layer]),
                            layer + "_negated_max"))])

    def add(self, outputs):
        for layer in self.layers:
            low = -outputs[layer + "_negated_max_output"].asnumpy().max()
            high = outputs[layer + "_max_output"].asnumpy().max()
            if layer in self.min_max_dict:
                seen_low, seen_high = self.min_max_dict[layer]
                low, high = min(seen_low, low), max(seen_high, high)
            self.min_max_dict[layer] = (low, high)


def channel_max(symbol, rank, name):
    """Max of ``symbol`` over each image and channel (a 4-d ``symbol``), else over all."""
    if rank == 4:
        return mx.sym.Pooling(symbol, global_pool=True, pool_type="max", kernel=(1, 1),
                              name=name)
    return mx.sym.max(symbol, name=name)


class Histograms:
    """Each calibrated layer's histogram over the batches (``entropy``), built as MXNet's
    collector builds it (symmetric range, widened as larger values come) and kept where it
    keeps it (``hist_dict``) for ``calib_graph``. The graph outputs the layers' outputs,
    all held at once: a batch takes the memory of all of them."""

    BINS = 8001  # MXNet's default

    def __init__(self, layers):
        self.layers = layers
        self.hist_dict = {}

    def symbol(self, fused, input_shapes):
        internals = fused.get_internals()
        return mx.sym.Group([internals[layer] for layer in self.layers])

    def add(self, outputs):
        for layer in self.layers:
            self.add_layer(layer, outputs[layer].asnumpy())

    def add_layer(self, layer, output):
        low, high = np.min(output), np.max(output)
        threshold = max(abs(low), abs(high))
        if layer in self.hist_dict:
            self.hist_dict[layer] = quantization.combine_histogram(
                self.hist_dict[layer], output, low, high, threshold)
        else:
            counts, edges = np.histogram(output, bins=self.BINS, range=(-threshold, threshold))
            self.hist_dict[layer] = (counts, edges, low, high, threshold)


STATISTICS = {"naive": MinMax, "entropy": Histograms}


def int8_layers(symbol):
    """Names of the layers of a quantized graph that compute in int8."""
    nodes = json.loads(symbol.tojson())["nodes"]
    return [node["name"] for node in nodes
            if node.get("attrs", {}).get("quantized") == "true"
            or node["op"].startswith("_contrib_quantized_")]


def calibration_thresholds(symbol):
    """``{layer: (min, max)}``: the calibrated output ranges a quantized graph stores in its
    layers' ``min_calib_range``/``max_calib_range`` attributes."""
    nodes = json.loads(symbol.tojson())["nodes"]
    return {node["name"]: (float(node["attrs"]["min_calib_range"]),
                           float(node["attrs"]["max_calib_range"]))
            for node in nodes if "min_calib_range" in node.get("attrs", {})}
