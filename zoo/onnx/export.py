"""Export of a detector to one self-describing ONNX file, run by :mod:`zoo.onnx.runtime`.

The file holds the whole fp32 inference graph, converted by MXNet's exporter with the
conversions of :mod:`zoo.onnx.converters`: for SSD the anchors as a constant, decoding,
thresholding, top-k and ``NonMaxSuppression``; for Faster R-CNN the proposals per level,
``RoiAlign``, the box head and the per-class NMS.

Inputs: ``data`` ``(B, 3, H, W)`` float32, normalised as the model's preprocessing says
(or, with ``graph_preprocessing="normalize"``, ``image`` ``(B, H, W, 3)`` float32 RGB
pixels 0-255, resized and padded with the mean pixel, which the graph normalises); a
Faster R-CNN also takes ``im_info`` ``(B, 3)`` rows ``[height, width, scale]`` of each
image's valid region. The batch is dynamic, and so are H and W for Faster R-CNN (SSD's are
``data_shape``). Output: ``detections`` ``(B, N, 6)`` rows ``[class, score, x1, y1, x2, y2]``,
corners normalised to the valid image, best first, class -1 for an empty row.

Metadata (``model.metadata_props``): ``zoo.format`` (:data:`FORMAT`), ``zoo.network``,
``zoo.class_names`` (JSON) and ``zoo.num_classes``, ``zoo.category_ids`` (JSON, a model
trained on a COCO file only), ``zoo.preprocessing`` (JSON), ``zoo.graph_preprocessing``,
``zoo.tiles`` (JSON, a model trained on tiles only: detection runs the file in them).
"""
import json
import logging
import os
import tempfile

import mxnet as mx
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from zoo.artifact import (ArtifactError, atomic_write, class_names as config_class_names,
                          fp32_only)
from zoo.errors import OptionsError
from zoo.onnx import FORMAT, GRAPH_PREPROCESSING, OUTPUT, converters
from zoo.schema.checks import repeated

__all__ = ["export_artifact", "export_model"]


def export_model(model, arg_params, aux_params, path, *, class_names=None, preprocessing=None,
                 graph_preprocessing="none", tiles=None):
    """Write ``model`` with its parameters to the ONNX file ``path`` (atomically, its folder
    made if need be); returns ``path``. ``class_names`` and ``preprocessing`` default to the
    model's; ``tiles``: the record of the tiles it was trained on (an artifact's), if any.

    Example:
        >>> import zoo
        >>> from zoo.onnx.export import export_model
        >>> model = zoo.get_model("ssd_mobilenetv2", data_shape=128, num_classes=2)
        >>> export_model(model, *model.init_params(seed=0), "/tmp/ssd.onnx")
        '/tmp/ssd.onnx'
    """
    if graph_preprocessing not in GRAPH_PREPROCESSING:
        raise OptionsError("graph_preprocessing: expected one of %s, got %r"
                           % (", ".join(GRAPH_PREPROCESSING), graph_preprocessing))
    preprocessing = preprocessing or model.preprocessing()
    class_names = list(class_names or config_class_names(model.config))
    if repeated(class_names):
        raise OptionsError("class_names repeat %s: classes of one name cannot be told apart"
                           % ", ".join(map(repr, repeated(class_names)[:3])))
    graph = _converted(model, {**arg_params, **aux_params})
    graph = _named_output(graph)
    if graph_preprocessing == "normalize":
        graph = _with_normalization(graph, preprocessing)
    _describe(graph, model.name, class_names, model.config.get("category_ids"), preprocessing,
              graph_preprocessing, tiles)
    onnx.checker.check_model(graph)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, lambda temporary: onnx.save(graph, temporary))
    return path


def export_artifact(artifact, path, graph_preprocessing="none"):
    """Write a loaded fp32 :class:`zoo.artifact.Artifact` to the ONNX file ``path``."""
    refusal = fp32_only(artifact.name, artifact.precision, "export")
    if refusal:
        raise ArtifactError(refusal)
    return export_model(artifact.model, artifact.arg_params, artifact.aux_params, path,
                        class_names=artifact.class_names, preprocessing=artifact.preprocessing,
                        graph_preprocessing=graph_preprocessing, tiles=artifact.tiles)


def _input_order(symbol, params):
    """The graph's data inputs in the order MXNet's exporter meets them."""
    nodes = json.loads(symbol.tojson())["nodes"]
    return [n["name"] for n in nodes if n["op"] == "null" and n["name"] not in params]


def _converted(model, params):
    """MXNet's exporter run on the model's portable inference graph: an ``onnx.ModelProto``."""
    symbol = model.symbol()
    used = set(symbol.list_arguments()) | set(symbol.list_auxiliary_states())
    params = {name: value for name, value in params.items() if name in used}
    params.update(_fixed_gammas(symbol, params))
    shapes = model.input_shapes(1)
    names = _input_order(symbol, params)
    fixed_side = "im_info" not in shapes  # SSD's anchors are constants of one input size
    dynamic = [(None,) + tuple(shapes[n][1:]) if fixed_side or n != "data"
               else (None, 3, None, None) for n in names]
    with tempfile.TemporaryDirectory() as scratch, converters.input_shapes(symbol, **shapes):
        path = os.path.join(scratch, "model.onnx")
        quiet = logging.getLogger().level
        logging.getLogger().setLevel(logging.WARNING)  # the exporter logs every step at INFO
        try:
            mx.onnx.export_model(symbol, params, in_shapes=[shapes[n] for n in names],
                                 in_types=[np.float32] * len(names), onnx_file_path=path,
                                 dynamic=True, dynamic_input_shapes=dynamic)
        finally:
            logging.getLogger().setLevel(quiet)
        return onnx.load(path)


def _fixed_gammas(symbol, params):
    """``{name: ones}`` for the scale of every ``BatchNorm`` with ``fix_gamma`` (MXNet's
    default): MXNet runs those at a scale of 1 whatever the parameter holds, while its
    exporter writes the parameter, so a stored scale other than 1 detected otherwise."""
    nodes = json.loads(symbol.tojson())["nodes"]
    fixed = {}
    for node in nodes:
        if node["op"] == "BatchNorm" and node.get("attrs", {}).get(
                "fix_gamma", "True").lower() in ("true", "1"):
            name = nodes[node["inputs"][1][0]]["name"]
            if name in params:
                fixed[name] = mx.nd.ones_like(params[name])
    return fixed


def _named_output(model):
    """``model`` with its one output renamed :data:`OUTPUT`, the parameters (which MXNet's
    exporter also lists as inputs) constants only, as ONNX Runtime folds only those, and
    without the constants no node reads (which ONNX Runtime warns about on every load)."""
    graph = model.graph
    read = {name for node in graph.node for name in node.input}
    constants = [tensor for tensor in graph.initializer if tensor.name in read]
    del graph.initializer[:]
    graph.initializer.extend(constants)
    names = {tensor.name for tensor in constants}
    inputs = [i for i in graph.input if i.name not in names and i.name in read]
    del graph.input[:]
    graph.input.extend(inputs)
    (output,) = graph.output
    old = output.name
    for node in graph.node:
        node.output[:] = [OUTPUT if name == old else name for name in node.output]
        node.input[:] = [OUTPUT if name == old else name for name in node.input]
    output.name = OUTPUT
    return model


def _with_normalization(model, preprocessing):
    """``model`` taking ``image`` ``(B, H, W, 3)`` RGB pixels instead of ``data``."""
    graph = model.graph
    data = next(i for i in graph.input if i.name == "data")
    dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else None)
            for d in data.type.tensor_type.shape.dim]
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                          [dims[0], dims[2], dims[3], 3])
    mean = numpy_helper.from_array(np.array(preprocessing["mean"], np.float32), "image_mean")
    std = numpy_helper.from_array(np.array(preprocessing["std"], np.float32), "image_std")
    nodes = [helper.make_node("Sub", ["image", "image_mean"], ["image_centred"]),
             helper.make_node("Div", ["image_centred", "image_std"], ["image_normalised"]),
             helper.make_node("Transpose", ["image_normalised"], ["data"], perm=[0, 3, 1, 2])]
    graph.initializer.extend([mean, std])
    inputs = [image if i.name == "data" else i for i in graph.input]
    del graph.input[:]
    graph.input.extend(inputs)
    existing = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + existing)
    return model


def _describe(model, network, class_names, category_ids, preprocessing, graph_preprocessing,
              tiles):
    ids = [] if category_ids is None else [("zoo.category_ids", json.dumps(category_ids))]
    # A file records the tiles as the artifact does, so that detect runs it as it was trained.
    tiled = [] if not tiles else [("zoo.tiles", json.dumps(tiles))]
    for key, value in [("zoo.format", FORMAT), ("zoo.network", network),
                       ("zoo.class_names", json.dumps(list(class_names))),
                       ("zoo.num_classes", str(len(class_names)))] + ids + [
                       ("zoo.preprocessing", json.dumps(preprocessing)),
                       ("zoo.graph_preprocessing", graph_preprocessing)] + tiled:
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
