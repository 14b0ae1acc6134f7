"""Inference graphs as they are deployed: fused for MKL-DNN, bound once per input shape.

MKL-DNN's subgraph pass folds each convolution with its batch norm, ReLU and
residual sum into one operator, so intermediate activations are never written
out. MXNet's executor applies the pass at bind time, but only while
``MXNET_SUBGRAPH_BACKEND`` allows it and never for Gluon's ``CachedOp``; a graph
fused before export runs fused however it is loaded.
"""
import collections

import mxnet as mx

__all__ = ["MKLDNN", "Predictor", "fuse", "mkldnn_available"]

MKLDNN = "MKLDNN"
MAX_EXECUTORS = 4
"""Executors a :class:`Predictor` keeps bound, the most recently used: each holds its own
activation memory, and a Faster R-CNN's batches come on canvases of many shapes."""


def mkldnn_available():
    """Whether this MXNet build has the MKL-DNN backend (fused and int8 CPU operators)."""
    return mx.runtime.Features().is_enabled(MKLDNN)


def fuse(symbol):
    """``symbol`` with MKL-DNN's fused operators (unchanged on builds without MKL-DNN).

    Parameters keep their names: fusion folds batch norm into convolution when
    the graph first runs, not in the stored weights.
    """
    if not mkldnn_available():
        return symbol
    return symbol.get_backend_symbol(MKLDNN)


class Predictor:
    """Runs an inference graph on a context with fixed parameters.

    One executor is bound per distinct set of input shapes, with no gradient
    buffers, and reused while it is among the :data:`MAX_EXECUTORS` most recently
    used: its memory is planned once (static allocation), and each call copies the
    inputs into the bound arrays.
    """

    def __init__(self, symbol, arg_params, aux_params, ctx=None):
        self.symbol = symbol
        self.ctx = ctx or mx.cpu()
        arguments, auxiliary = symbol.list_arguments(), set(symbol.list_auxiliary_states())
        self.input_names = [n for n in arguments if n not in arg_params]
        self.arg_params = {k: v.as_in_context(self.ctx) for k, v in arg_params.items()
                           if k in arguments}
        self.aux_params = {k: v.as_in_context(self.ctx) for k, v in aux_params.items()
                           if k in auxiliary}
        missing = auxiliary - set(self.aux_params)
        if missing:
            raise ValueError("no values for the graph's auxiliary states %s"
                             % ", ".join(sorted(missing)))
        self._executors = collections.OrderedDict()

    def executor(self, shapes):
        """The executor bound for input ``shapes`` (a dict of name to shape)."""
        key = tuple(sorted((name, tuple(shape)) for name, shape in shapes.items()))
        if key in self._executors:
            self._executors.move_to_end(key)
        else:
            if len(self._executors) == MAX_EXECUTORS:
                self._executors.popitem(last=False)
            inputs = {name: mx.nd.zeros(shape, ctx=self.ctx) for name, shape in shapes.items()}
            self._executors[key] = self.symbol.bind(
                self.ctx, dict(self.arg_params, **inputs), aux_states=self.aux_params,
                grad_req="null")
        return self._executors[key]

    def __call__(self, **inputs):
        """Outputs (NDArrays, computed asynchronously) for inputs given as numpy arrays or
        NDArrays by name."""
        unknown = set(inputs) ^ set(self.input_names)
        if unknown:
            raise ValueError("the graph takes inputs %s, got %s"
                             % (", ".join(self.input_names), ", ".join(sorted(inputs))))
        executor = self.executor({name: value.shape for name, value in inputs.items()})
        for name, value in inputs.items():
            executor.arg_dict[name][:] = value
        return executor.forward(is_train=False)
