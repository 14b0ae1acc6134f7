"""Facts about a backbone graph read from the graph itself.

Shape inference gives every layer's output shape; a dominator analysis gives
the trunk: the layers that every path from the input to the deepest output
passes through. A feature layer must be on the trunk and be the last trunk
layer at its resolution, otherwise the layers after it are silently dropped
(the bug of MXNet PR #8998).
"""
import json
import math

__all__ = ["BackboneGraph", "effective_stride"]

# Growing the input by a multiple of every stride grows each map by exactly
# input growth / stride, whatever the padding; 512 covers strides up to 512.
STRIDE_PROBE = 512


class BackboneGraph:
    """Output shapes, topological order and trunk of a backbone body symbol."""

    def __init__(self, body, height, width=None):
        self.data_shape = (height, width or height)
        graph = json.loads(body.tojson())
        nodes = graph["nodes"]
        self.order = []
        preds = {}
        for node in nodes:
            if node["op"] == "null" and node["name"] != "data":
                continue
            inputs = [nodes[i[0]] for i in node["inputs"]]
            preds[node["name"]] = [n["name"] for n in inputs
                                   if n["op"] != "null" or n["name"] == "data"]
            self.order.append(node["name"])
        self.position = {name: i for i, name in enumerate(self.order)}
        self.shapes = output_shapes(body, self.data_shape)
        larger = output_shapes(body, tuple(side + STRIDE_PROBE for side in self.data_shape))
        self.strides = {name: STRIDE_PROBE // max(larger[name][2] - shape[2], 1)
                        for name, shape in self.shapes.items() if len(shape) == 4}
        self.output = nodes[graph["heads"][0][0]]["name"]
        self.trunk = self._dominators(preds, self.output)

    def _dominators(self, preds, target):
        """Names of the nodes that dominate ``target`` (immediate-dominator tree on a DAG)."""
        idom, depth = {"data": "data"}, {"data": 0}

        def common_dominator(a, b):
            while a != b:
                if depth[a] < depth[b]:
                    a, b = b, a
                a = idom[a]
            return a

        for name in self.order[1:]:
            parents = [p for p in preds[name] if p in idom]
            if not parents:
                continue
            dom = parents[0]
            for parent in parents[1:]:
                dom = common_dominator(dom, parent)
            idom[name], depth[name] = dom, depth[dom] + 1
        chain, node = set(), target
        while node != "data":
            chain.add(node)
            node = idom[node]
        return chain

    def has_layer(self, name):
        return name in self.shapes and name != "data"

    def spatial(self, name):
        return self.shapes[name][2:]

    def channels(self, name):
        return self.shapes[name][1]

    def stride(self, name):
        """The layer's true stride: input pixels per output pixel, measured from the graph."""
        return self.strides[name]

    def deeper_at_same_resolution(self, name):
        """The deepest trunk layer after ``name`` with the same spatial size, or None."""
        later = [other for other in self.trunk
                 if self.position[other] > self.position[name]
                 and self.spatial(other) == self.spatial(name)]
        return max(later, key=self.position.get) if later else None


def output_shapes(body, data_shape):
    """Output shape of every operator of ``body`` for a ``data_shape`` (H, W) input."""
    internals = body.get_internals()
    _, out_shapes, _ = internals.infer_shape(data=(1, 3) + tuple(data_shape))
    return {output[:-len("_output")]: tuple(shape)
            for output, shape in zip(internals.list_outputs(), out_shapes)
            if output.endswith("_output")}


def effective_stride(data_shape, size):
    """Nominal stride of a ``size`` map on a ``data_shape`` input, for display."""
    return 2 ** round(math.log2(data_shape / size))
