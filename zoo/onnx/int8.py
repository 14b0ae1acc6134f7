"""Int8 quantization of an exported ONNX detector, calibrated on the user's images: the graph
gets ``QuantizeLinear``/``DequantizeLinear`` pairs (QDQ) that OpenVINO runs as int8 layers.

Why the zoo's own thresholds rather than NNCF: NNCF needs numpy >= 1.24 and MXNet 1.9.1
numpy < 1.24, so they cannot share an environment; and NNCF failed on the FPN export (its
in-graph anchors). The thresholds here are the zoo's naive calibration
(:mod:`zoo.inference.quantization` ``naive``): each quantized layer's input range is the min
and max observed over the calibration images, run on ONNX Runtime.

What is quantized: the input of every ``Conv`` and ``Gemm`` whose weights are constants
(but the first convolution, on the image's 3 channels),
symmetric per output channel for the weights (int8, zero point 0) and per tensor for the
activations (uint8 from 0 for a non-negative input such as a ReLU's output, else symmetric
int8). ``BatchNormalization`` after a convolution is folded into its weights first, so that
the int8 weights are the ones that run. Everything else stays fp32: anchors, box decoding,
proposals, ``RoiAlign``, top-k and NMS read the fp32 tensors, so the post-processing is the
fp32 graph's. Each cast of an integer tensor to float (shape arithmetic: the anchor grid's
``Range`` limits, batch indices) is followed by a ``Floor``, which keeps it out of
OpenVINO's int8 rewrites (:func:`shield_integer_casts`).

Needs onnx and onnxruntime; loads no MXNet.
"""
import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["IMAGE_CHANNELS", "QUANTIZED_OPS", "calibrate", "fold_batch_norms", "quantize",
           "quantize_file", "quantized_layers", "shield_integer_casts"]

QUANTIZED_OPS = ("Conv", "Gemm")
"""Operators whose input and constant weights become int8."""
WEIGHT_INPUT = 1
IMAGE_CHANNELS = 3
"""A convolution of at most this many input channels reads the image; it stays fp32."""


def constants(model):
    """``{name: numpy array}`` of the graph's initializers."""
    return {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}


def consumers(model):
    """``{tensor name: [nodes reading it]}``."""
    readers = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    return readers


def fold_batch_norms(model):
    """``model`` with each ``BatchNormalization`` that alone reads a ``Conv``'s output folded
    into that convolution's weights and bias (what OpenVINO would do after quantizing, which
    would leave the int8 weights unscaled). Returns the number folded."""
    values, readers = constants(model), consumers(model)
    producers = {out: node for node in model.graph.node for out in node.output}
    folded = [bn for bn in model.graph.node if bn.op_type == "BatchNormalization"
              and _foldable(bn, producers, readers, values)]
    for bn in folded:
        _fold(model, producers[bn.input[0]], bn, values)
    for bn in folded:
        model.graph.node.remove(bn)
    _drop_unread(model)
    return len(folded)


def _foldable(bn, producers, readers, values):
    conv = producers.get(bn.input[0])
    return (conv is not None and conv.op_type == "Conv" and len(readers[bn.input[0]]) == 1
            and len(bn.output) == 1 and all(name in values for name in bn.input[1:])
            and conv.input[WEIGHT_INPUT] in values)


def _fold(model, conv, bn, values):
    """Rewrite ``conv`` to compute ``bn(conv(x))``, writing ``bn``'s output."""
    epsilon = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
    gamma, beta, mean, var = (values[name].astype(np.float64) for name in bn.input[1:5])
    scale = gamma / np.sqrt(var + epsilon)
    weight = values[conv.input[WEIGHT_INPUT]].astype(np.float64)
    bias = (values[conv.input[2]].astype(np.float64) if len(conv.input) > 2
            else np.zeros_like(scale))
    name = conv.name or conv.output[0]
    _set_constant(model, name + "_folded_weight",
                  weight * scale.reshape((-1,) + (1,) * (weight.ndim - 1)))
    _set_constant(model, name + "_folded_bias", (bias - mean) * scale + beta)
    conv.input[:] = [conv.input[0], name + "_folded_weight", name + "_folded_bias"]
    conv.output[0] = bn.output[0]


def _set_constant(model, name, value, dtype=np.float32):
    model.graph.initializer.append(numpy_helper.from_array(np.asarray(value, dtype), name))


def _drop_unread(model):
    """Remove the initializers no node reads (the folded convolutions' old ones)."""
    read = {name for node in model.graph.node for name in node.input}
    kept = [tensor for tensor in model.graph.initializer if tensor.name in read]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)


def quantized_layers(model):
    """The nodes whose input and weights :func:`quantize` makes int8, in graph order: each
    ``Conv`` and ``Gemm`` with constant weights, but those reading the image's
    :data:`IMAGE_CHANNELS` channels."""
    values = constants(model)
    return [node for node in model.graph.node if node.op_type in QUANTIZED_OPS
            and len(node.input) > WEIGHT_INPUT and node.input[WEIGHT_INPUT] in values
            and node.input[0] not in values and not _reads_image(node, values)]


def _reads_image(node, values):
    # The first convolution stays fp32: with 3 input channels int8 gains it little and
    # costs the most accuracy (the pixels' range is the widest).
    weight = values[node.input[WEIGHT_INPUT]]
    return node.op_type == "Conv" and weight.shape[1] * _attribute(node, "group", 1) \
        <= IMAGE_CHANNELS


def calibrate(model, batches, progress=None):
    """``{tensor: (min, max)}`` of the input of every quantized layer of ``model`` (folded
    already) over ``batches``, feeds of the graph's inputs by name, run on ONNX Runtime.
    ``progress`` wraps the batches (e.g. a tqdm bar)."""
    import onnxruntime
    watched = sorted({node.input[0] for node in quantized_layers(model)})
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {output.name for output in probe.graph.output}
    probe.graph.output.extend(helper.make_empty_tensor_value_info(name)
                              for name in watched if name not in known)
    session = onnxruntime.InferenceSession(probe.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    ranges = {}
    for feed in (progress(batches) if progress else batches):
        for name, value in zip(watched, session.run(watched, feed)):
            low, high = float(np.min(value)), float(np.max(value))
            seen = ranges.get(name, (low, high))
            ranges[name] = (min(seen[0], low), max(seen[1], high))
    if not ranges:
        raise ValueError("calibration saw no batch: give at least one image")
    return ranges


def activation_scale(low, high):
    """``(scale, zero point)`` of a tensor observed in ``[low, high]``: uint8 from 0 when it
    is never negative, else symmetric int8; a constant-zero tensor gets scale 1."""
    if low >= 0:
        return max(high, 1e-12) / 255.0, np.uint8(0)
    return max(-low, high, 1e-12) / 127.0, np.int8(0)


def weight_scales(weight):
    """Per-output-channel (axis 0) symmetric int8 scales and the int8 weights."""
    largest = np.abs(weight.reshape(len(weight), -1)).max(axis=1)
    scales = np.where(largest > 0, largest / 127.0, 1.0).astype(np.float32)
    shaped = scales.reshape((-1,) + (1,) * (weight.ndim - 1))
    return scales, np.clip(np.round(weight / shaped), -127, 127).astype(np.int8)


def quantize(model, ranges):
    """``model`` (folded) with a QDQ pair on the input of each quantized layer observed in
    ``ranges`` (:func:`calibrate`) and int8 weights behind a ``DequantizeLinear``; the fp32
    tensor stays for every other reader. Returns the number of layers quantized."""
    values = constants(model)
    layers = [node for node in quantized_layers(model) if node.input[0] in ranges]
    new_nodes, dequantized = {}, {}
    for node in layers:
        source = node.input[0]
        if source not in dequantized:
            dequantized[source] = _quantize_activation(model, source, ranges[source],
                                                        new_nodes)
        node.input[0] = dequantized[source]
        node.input[WEIGHT_INPUT] = _quantize_weight(model, node, values, new_nodes)
    _insert_before_readers(model, new_nodes)
    _drop_unread(model)
    return len(layers)


def _quantize_activation(model, source, observed, new_nodes):
    """The name of ``source`` quantized and dequantized; its nodes go into ``new_nodes``."""
    scale, zero = activation_scale(*observed)
    base = source + "_int8"
    _set_constant(model, base + "_scale", scale)
    model.graph.initializer.append(numpy_helper.from_array(np.array(zero), base + "_zero"))
    new_nodes.setdefault(base + "_dq", []).extend([
        helper.make_node("QuantizeLinear", [source, base + "_scale", base + "_zero"],
                         [base + "_q"], name=base + "_quantize"),
        helper.make_node("DequantizeLinear", [base + "_q", base + "_scale", base + "_zero"],
                         [base + "_dq"], name=base + "_dequantize")])
    return base + "_dq"


def _quantize_weight(model, node, values, new_nodes):
    """The name of ``node``'s weights stored int8 per output channel and dequantized."""
    weight = values[node.input[WEIGHT_INPUT]]
    if node.op_type == "Gemm" and not _attribute(node, "transB", 0):
        weight = weight.T  # per output column: make the output axis come first
        _remove_attribute(node, "transB")
        node.attribute.extend([helper.make_attribute("transB", 1)])
    scales, int8 = weight_scales(weight)
    base = (node.name or node.output[0]) + "_weight_int8"
    model.graph.initializer.extend([
        numpy_helper.from_array(int8, base), numpy_helper.from_array(scales, base + "_scale"),
        numpy_helper.from_array(np.zeros(len(scales), np.int8), base + "_zero")])
    new_nodes.setdefault(base + "_dq", []).append(helper.make_node(
        "DequantizeLinear", [base, base + "_scale", base + "_zero"], [base + "_dq"],
        name=base + "_dequantize", axis=0))
    return base + "_dq"


def _attribute(node, name, default):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name),
                default)


def _remove_attribute(node, name):
    for attribute in [a for a in node.attribute if a.name == name]:
        node.attribute.remove(attribute)


def _insert_before_readers(model, new_nodes):
    """Put each group of ``new_nodes`` (by the tensor it makes) right before its first
    reader, keeping the graph topologically sorted."""
    ordered = []
    for node in model.graph.node:
        for name in node.input:
            ordered.extend(new_nodes.pop(name, ()))
        ordered.append(node)
    del model.graph.node[:]
    model.graph.node.extend(ordered)


FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
               onnx.TensorProto.BFLOAT16)


def shield_integer_casts(model):
    """Put a ``Floor`` (the identity on integers) after each ``Cast`` of an integer or
    boolean tensor to float; returns the number shielded.

    Why: once a graph holds int8 layers, OpenVINO's CPU plugin runs its low-precision
    transformations, which read any ``Convert`` from an integer type followed by a
    constant ``Multiply``/``Add`` as a dequantization and move it about. On an arange's
    limit (``Cast(ReduceProd(Shape(feature))) * step + start - step / 2``, a Faster
    R-CNN's anchor grid) the ``- 0.5`` ends up fused into the integer ``ReduceProd`` and
    the ``Cast`` is gone: the limit reads -2.7e36 instead of 7.5, the grid's ``Range`` is
    empty and the ``Broadcast`` after it fails its shape inference (OpenVINO 2026.4). No
    transformation sees through a ``Floor``."""
    types = _element_types(model)
    shielded, nodes = 0, []
    for node in model.graph.node:
        nodes.append(node)
        if _casts_integer_to_float(node, types):
            value = node.output[0]
            node.output[0] = value + "_integer"
            nodes.append(helper.make_node("Floor", [node.output[0]], [value],
                                          name=value + "_shield"))
            shielded += 1
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return shielded


def _casts_integer_to_float(node, types):
    source = types.get(node.input[0]) if node.op_type == "Cast" else None
    return (source not in (None, onnx.TensorProto.UNDEFINED) and source not in FLOAT_TYPES
            and _attribute(node, "to", None) in FLOAT_TYPES)


def _element_types(model):
    """``{tensor: ONNX element type}`` as ONNX's shape inference finds them."""
    inferred = onnx.shape_inference.infer_shapes(model).graph
    return {value.name: value.type.tensor_type.elem_type for value in (
        list(inferred.input) + list(inferred.value_info) + list(inferred.output))}


def quantize_file(source, batches, path, progress=None):
    """Fold, calibrate on ``batches`` and quantize the ONNX file ``source`` into ``path``
    (its integer casts shielded); returns ``(path, layers quantized)``."""
    model = onnx.load(source)
    fold_batch_norms(model)
    count = quantize(model, calibrate(model, batches, progress))
    shield_integer_casts(model)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path, count

