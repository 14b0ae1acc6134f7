"""Multiply-add counts of a symbol's convolutions and fully connected layers, from
shape inference, so any MXNet graph (ours or an exported GluonCV one) is counted
the same way."""
import json

import numpy as np

__all__ = ["count_flops", "flops_by_layer"]


def flops_by_layer(symbol, **input_shapes):
    """``{layer name: FLOPs}`` (2 per multiply-add) of each Convolution and FullyConnected
    operator."""
    internals = symbol.get_internals()
    _, out_shapes, _ = internals.infer_shape(**input_shapes)
    shapes = dict(zip(internals.list_outputs(), out_shapes))
    arg_shapes, _, _ = symbol.infer_shape(**input_shapes)
    weights = dict(zip(symbol.list_arguments(), arg_shapes))
    nodes = json.loads(symbol.tojson())["nodes"]
    flops = {}
    for node in nodes:
        if node["op"] not in ("Convolution", "FullyConnected"):
            continue
        weight = nodes[node["inputs"][1][0]]["name"]
        out = shapes.get(node["name"] + "_output")
        if out is None or weight not in weights:
            continue
        # Each output element of both operators takes one multiply-add per weight in a row.
        flops[node["name"]] = 2 * int(np.prod(weights[weight][1:])) * int(np.prod(out))
    return flops


def count_flops(symbol, **input_shapes):
    """FLOPs (2 per multiply-add) of the Convolution and FullyConnected operators."""
    return sum(flops_by_layer(symbol, **input_shapes).values())
