"""Training in bfloat16 where the CPU has it (``zoo train --dtype bf16``).

The training graph is converted by MXNet's own AMP (``mxnet.contrib.amp.convert_symbol``,
``target_dtype="bfloat16"``): convolutions and fully connected layers run in bfloat16, and
the operators that run in either precision (batch norm, activations, pooling, sums,
concatenations) follow their inputs, so a backbone runs in bfloat16 from its first cast to
its heads. What stays fp32:

- the parameters: AMP casts each weight on its way into a layer (``amp_cast``), whose
  backward casts the gradient back, so Module holds fp32 weights, gradients and optimizer
  state (the master weights) and checkpoints are ordinary fp32 artifacts;
- batch norm's scale, shift and running statistics (AMP's own rule);
- anchors, target assignment and losses (``MultiBoxPrior``/``MultiBoxTarget``, the Faster
  R-CNN target operators, ``SoftmaxOutput``, ``smooth_l1``, ...), which AMP keeps in fp32,
  casting their inputs.

Adjustments to AMP's lists, from oneDNN's kernels on AVX512-BF16 (``DNNL_VERBOSE=1``,
SSD-512 ResNet-50) and MXNet's profiler (see :data:`FP32_OPS`):

- A convolution or fully connected layer whose input or output channels are not a
  multiple of :data:`CHANNEL_BLOCK` stays fp32. oneDNN's bfloat16 kernels work on blocks
  of 16 channels; such a layer falls back to a plain-layout gemm kernel, and the batch norm
  and pooling after it to reference kernels (the stem's 3-channel convolution made the
  first batch norm and pooling cost more than all others together).
- Anchor generators read only their input's height and width: they get a one-channel
  slice of it, cut off from the gradient, instead of a fp32 copy of a whole feature map.
- An fp32 tensor read both by a converted layer and by an either-precision operator gets
  an explicit bfloat16 cast for the latter (:func:`_cast_shared_fp32`: MXNet 1.9's AMP
  pass would mistype it).

:func:`bf16_inference_graph` converts an inference graph the same way, its weights stored
in bfloat16, for ``zoo benchmark --dtypes bf16`` and ``zoo quantize --dtype bf16`` (a bf16
artifact, :mod:`zoo.jobs.quantize`). Whether the CPU runs bfloat16 natively is
:func:`zoo.predictor.bf16_unavailable`'s to say (here too), so that loading a bf16 artifact
can ask it.
"""
import json

import mxnet as mx
import numpy as np
from mxnet.contrib import amp

from zoo.choices import TRAIN_DTYPES
from zoo.errors import OptionsError
from zoo.predictor import bf16_instruction_sets, bf16_unavailable, fuse

__all__ = ["CHANNEL_BLOCK", "bf16_inference_graph", "bf16_instruction_sets", "bf16_layers",
           "bf16_training_symbol", "bf16_unavailable", "check_dtype", "resolve_dtype"]

CHANNEL_BLOCK = 16
"""oneDNN's channel block of bfloat16 convolutions on AVX-512."""
SHAPE_ONLY_OPS = ("_contrib_MultiBoxPrior",)
"""Operators that read only their first input's shape."""
FP32_OPS = ("_contrib_MultiBoxPrior", "_contrib_MultiBoxTarget", "_contrib_MultiBoxDetection",
            "clip")
"""Operators kept in fp32. Anchors, SSD target assignment and decoding: AMP lists them as
"widest type" operators (they would take bfloat16 inputs), but they have fp32 kernels
only. ``clip`` (MobileNet's ReLU6) has no oneDNN kernel: MXNet's own converts each bfloat16
element in software, 1.4x the time of casting to fp32, clipping and casting back."""
CONVERTED_OPS = ("Convolution", "FullyConnected")
FUSED_OPS = ("_sg_mkldnn_conv", "_sg_mkldnn_fully_connected")
"""MKL-DNN's fused convolution and fully connected operators (:func:`zoo.predictor.fuse`)."""


def check_dtype(dtype, ctx="cpu", flag="--dtype"):
    """Refuse, in one line naming ``flag``, a ``dtype`` not in
    :data:`~zoo.choices.TRAIN_DTYPES`, or bf16 where it cannot run."""
    if dtype not in TRAIN_DTYPES:
        raise OptionsError("%s %r: one of %s" % (flag, dtype, ", ".join(TRAIN_DTYPES)))
    reason = bf16_unavailable(ctx) if dtype == "bf16" else None
    if reason:
        raise OptionsError("%s bf16: %s; use %s fp32 (or auto, which picks fp32 here)"
                           % (flag, reason, flag))


def resolve_dtype(dtype, ctx="cpu"):
    """``(precision, note)``: the precision ``dtype`` trains in on ``ctx``, ``fp32`` or
    ``bf16``, and for ``auto`` why it was picked (None otherwise)."""
    check_dtype(dtype, ctx)
    if dtype != "auto":
        return dtype, None
    reason = bf16_unavailable(ctx)
    if reason:
        return "fp32", "auto: " + reason
    return "bf16", "auto: this CPU has %s" % " and ".join(bf16_instruction_sets())


def _graph(symbol):
    return json.loads(symbol.tojson(remove_amp_cast=False))


def _groups(node):
    """``num_group`` of a convolution, or of the one a fused MKL-DNN node holds."""
    inner = [n for graph in node.get("subgraphs", ()) for n in graph["nodes"]
             if n["op"] == "Convolution"]
    return int((inner[0] if inner else node).get("attrs", {}).get("num_group", 1))


def _unblocked_layers(symbol, input_shapes):
    """Convolutions and fully connected layers (fused or not) whose input or output
    channels are not a multiple of :data:`CHANNEL_BLOCK`."""
    arg_shapes, _, _ = symbol.infer_shape(**input_shapes)
    shapes = dict(zip(symbol.list_arguments(), arg_shapes))
    nodes = _graph(symbol)["nodes"]
    names = []
    for node in nodes:
        if node["op"] not in CONVERTED_OPS + FUSED_OPS:
            continue
        weight = shapes[nodes[node["inputs"][1][0]]["name"]]
        groups = _groups(node)
        # A weight is (out, in / groups, kernel...) or, fully connected, (out, in).
        channels = (weight[0], weight[1] * groups)
        if any(count % CHANNEL_BLOCK for count in channels):
            names.append(node["name"])
    return names


def _rewritten(symbol, edit):
    """``symbol`` with each operator's inputs replaced by ``edit(node, inputs, add)``:
    ``node`` is the operator as it was, ``inputs`` its ``[node index, output, version]``
    entries in the new graph, ``add(node)`` adds a node before it and returns its index."""
    graph = _graph(symbol)
    renumbered, old_to_new = [], {}

    def add(node):
        renumbered.append(node)
        return len(renumbered) - 1
    for index, node in enumerate(graph["nodes"]):
        inputs = [[old_to_new[i], k, v] for i, k, v in node["inputs"]]
        old_to_new[index] = add(dict(node, inputs=edit(node, inputs, add)))
    graph["nodes"] = renumbered
    graph["arg_nodes"] = [i for i, node in enumerate(renumbered) if node["op"] == "null"]
    graph["heads"] = [[old_to_new[i], k, v] for i, k, v in graph["heads"]]
    graph.pop("node_row_ptr", None)
    return mx.sym.load_json(json.dumps(graph))


def _shape_only_inputs(symbol):
    """``symbol`` with each :data:`SHAPE_ONLY_OPS` operator reading a one-channel slice of
    its input, without gradient: the same output, and AMP's fp32 cast of it is cheap."""
    def edit(node, inputs, add):
        if node["op"] not in SHAPE_ONLY_OPS:
            return inputs
        sliced = add({"op": "slice_axis", "name": node["name"] + "_shape_source",
                      "attrs": {"axis": "1", "begin": "0", "end": "1"}, "inputs": inputs[:1]})
        blocked = add({"op": "BlockGrad", "name": node["name"] + "_shape_source_nograd",
                       "inputs": [[sliced, 0, 0]]})
        return [[blocked, 0, 0]] + inputs[1:]
    return _rewritten(symbol, edit)


def _cast_shared_fp32(symbol, target_ops, excluded):
    """``symbol`` with an explicit bfloat16 cast between each possibly-fp32 tensor (the output
    of a widest-type, fp32 or excluded operator) and the operators of AMP's either-precision
    list that read it, where a converted layer reads it too.

    MXNet 1.9's AMP pass casts such a tensor to bfloat16 for the layer, and then takes it for
    bfloat16 in the either-precision operator too, which in fact reads the fp32 original: a
    C4 Inception head's max-pooling of the fp32 ROI features, concatenated with bfloat16
    convolutions of them, failed the graph's type check."""
    nodes = _graph(symbol)["nodes"]
    either = set(amp.list_lp16_fp32_ops(amp.amp.bfloat16)) - set(target_ops)
    maybe_fp32 = (set(amp.list_widest_type_cast(amp.amp.bfloat16))
                  | set(amp.list_fp32_ops(amp.amp.bfloat16))) - set(target_ops)
    readers = {}
    for node in nodes:
        if node["op"] != "null" and node["name"] not in excluded:
            for i, k, _ in node["inputs"]:
                readers.setdefault((i, k), set()).add(node["op"])
    shared = {entry for entry, ops in readers.items()
              if (nodes[entry[0]]["op"] in maybe_fp32 or nodes[entry[0]]["name"] in excluded)
              and ops & set(target_ops) and ops & either}
    casts = {}

    def edit(node, inputs, add):
        if node["op"] not in either or node["name"] in excluded:
            return inputs
        for position, (i, k, _) in enumerate(node["inputs"]):
            if (i, k) in shared:
                if (i, k) not in casts:
                    casts[i, k] = add({"op": "amp_cast", "attrs": {"dtype": "bfloat16"},
                                       "name": "%s_%d_bf16" % (nodes[i]["name"], k),
                                       "inputs": [inputs[position]]})
                inputs[position] = [casts[i, k], 0, 0]
        return inputs
    return _rewritten(symbol, edit)


def _conversion(symbol, input_shapes, fp32_ops, target_ops=CONVERTED_OPS):
    """``(symbol, keywords)``: ``symbol`` with anchors reading shapes only and shared fp32
    tensors cast, and AMP's keywords converting ``target_ops`` to bfloat16 but those off the
    channel blocks, and the operators ``fp32_ops`` to fp32."""
    symbol = _shape_only_inputs(symbol)
    nodes = _graph(symbol)["nodes"]
    excluded = _unblocked_layers(symbol, input_shapes) + [
        node["name"] for node in nodes if node["op"] in fp32_ops]
    symbol = _cast_shared_fp32(symbol, target_ops, set(excluded))
    keywords = {"target_dtype": "bfloat16", "excluded_sym_names": excluded}
    if target_ops != CONVERTED_OPS:
        keywords.update(target_dtype_ops=list(target_ops),
                        fp32_ops=[op for op in amp.list_fp32_ops(amp.amp.bfloat16)
                                  if op not in target_ops])
    return symbol, keywords


def bf16_training_symbol(symbol, input_shapes):
    """The fp32 training graph ``symbol`` (inputs and ``label`` of ``input_shapes``)
    converted for bfloat16 training (see the module's doc): same arguments, auxiliary
    states and outputs, all fp32."""
    symbol, keywords = _conversion(symbol, input_shapes, FP32_OPS)
    return amp.convert_symbol(symbol, data_names=list(input_shapes), **keywords)


def bf16_inference_graph(symbol, arg_params, aux_params, input_shapes, fuse_first):
    """``(symbol, arg_params, aux_params)``: the inference graph ``symbol`` (inputs of
    ``input_shapes``) in bfloat16, fused for MKL-DNN, its layers' weights stored in bfloat16
    (a cast in the graph would run at every call, and a fused convolution would fold its
    batch norm again each time). Converted then fused (``fuse_first`` False) or fused then
    converted (AMP converting the fused operators): the two orders ``zoo benchmark --dtypes
    bf16`` times. ``clip`` stays bfloat16 here: fusion folds it into its convolution. The
    given parameter dicts are not changed."""
    fp32_ops = tuple(op for op in FP32_OPS if op != "clip")
    if fuse_first:
        symbol, keywords = _conversion(fuse(symbol), input_shapes, fp32_ops,
                                       CONVERTED_OPS + FUSED_OPS)
    else:
        symbol, keywords = _conversion(symbol, input_shapes, fp32_ops)
    # convert_model casts the dicts it is given
    converted, args, aux = amp.convert_model(symbol, dict(arg_params), dict(aux_params),
                                             cast_optional_params=True, **keywords)
    return (converted if fuse_first else fuse(converted)), args, aux


def bf16_layers(symbol, input_shapes):
    """Names of the operators of a converted graph ``symbol`` whose output is bfloat16,
    casts excluded."""
    internals = symbol.get_internals()
    _, types, _ = internals.infer_type(**{name: np.float32 for name in input_shapes})
    bf16 = {name for name, dtype in zip(internals.list_outputs(), types)
            if dtype is not None and np.dtype(dtype) == np.dtype(amp.amp.bfloat16)}
    return [node["name"] for node in _graph(symbol)["nodes"]
            if node["op"] not in ("null", "amp_cast", "amp_multicast")
            and (node["name"] + "_output") in bf16]
