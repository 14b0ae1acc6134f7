"""Inference graphs as they are deployed: fused for MKL-DNN, bound once per input shape.

MKL-DNN's subgraph pass folds each convolution with its batch norm, ReLU and
residual sum into one operator, so intermediate activations are never written
out. MXNet's executor applies the pass at bind time, but only while
``MXNET_SUBGRAPH_BACKEND`` allows it and never for Gluon's ``CachedOp``; a graph
fused before export runs fused however it is loaded.
"""
import collections
import warnings

import mxnet as mx

__all__ = ["BF16_INSTRUCTION_SETS", "MKLDNN", "Predictor", "VNNI_INSTRUCTION_SETS",
           "bf16_instruction_sets", "bf16_unavailable", "cpu_flags", "fuse",
           "int8_speed_note", "mkldnn_available", "warn_int8_speed"]

MKLDNN = "MKLDNN"
BF16_INSTRUCTION_SETS = ("avx512_bf16", "amx_bf16")
"""The /proc/cpuinfo flags of native bfloat16 arithmetic (Intel Cooper Lake and later,
AMD Zen 4 and later; AMX on Sapphire Rapids and later)."""
VNNI_INSTRUCTION_SETS = ("avx512_vnni", "avx_vnni")
"""The /proc/cpuinfo flags of VNNI, the int8 dot product in one instruction (Intel Cascade
Lake, Ice Lake and Alder Lake and later, AMD Zen 4 and later). Without it an int8 dot product
takes three: ``zoo benchmark``'s int8 matmul peak was 3.1x its fp32 one on a Xeon with
AVX-512 VNNI, 1.5x with oneDNN capped to AVX2 (``DNNL_MAX_CPU_ISA=AVX2``)."""
MAX_EXECUTORS = 4
"""Executors a :class:`Predictor` keeps bound, the most recently used: each holds its own
activation memory, and a Faster R-CNN's batches come on canvases of many shapes."""


def mkldnn_available():
    """Whether this MXNet build has the MKL-DNN backend (fused and int8 CPU operators)."""
    return mx.runtime.Features().is_enabled(MKLDNN)


def cpu_flags(path="/proc/cpuinfo"):
    """The CPU's feature flags (empty where ``path`` cannot be read: not Linux)."""
    try:
        with open(path) as stream:
            for line in stream:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def bf16_instruction_sets():
    """Which of :data:`BF16_INSTRUCTION_SETS` this CPU has."""
    flags = cpu_flags()
    return tuple(name for name in BF16_INSTRUCTION_SETS if name in flags)


def bf16_unavailable(ctx="cpu"):
    """Why a graph on ``ctx`` (a device string) cannot run in bfloat16, or None. Here, beside
    the executor, so that loading a bf16 artifact can ask it as training does
    (:mod:`zoo.engine.precision`)."""
    if ctx != "cpu":
        return "bfloat16 runs on the CPU's oneDNN kernels, not on %s" % ctx
    if not mkldnn_available():
        return "this MXNet build has no oneDNN (MKLDNN), whose kernels run bfloat16"
    if not bf16_instruction_sets():
        return ("this CPU has neither %s among its /proc/cpuinfo flags: bfloat16 would be "
                "emulated, slower than fp32" % " nor ".join(BF16_INSTRUCTION_SETS))
    return None


def int8_speed_note():
    """The line saying that this CPU has none of :data:`VNNI_INSTRUCTION_SETS`, so that int8
    gains less over fp32 here than where it has; None where it has one, or where its flags
    cannot be read (not Linux): a note that may be wrong is not given.

    Not "int8 will not be faster": measured side by side (BENCHMARKS.md, "int8 without
    VNNI"), MXNet int8 of ssd_mobilenetv2 was 3.66x fp32 with oneDNN capped to AVX2, though
    the int8 matmul peak fell from 3.1x fp32's to 1.5x."""
    flags = cpu_flags()
    if not flags or any(name in flags for name in VNNI_INSTRUCTION_SETS):
        return None
    return ("this CPU has neither %s (VNNI, int8 dot products): int8's arithmetic peak is "
            "about 1.5x fp32's here against 3.1x with VNNI; measure both with zoo benchmark "
            "--dtypes fp32,int8 before deploying int8" % " nor ".join(VNNI_INSTRUCTION_SETS))


def warn_int8_speed():
    """Warn with :func:`int8_speed_note` where there is one: the int8 jobs (zoo quantize,
    zoo export --int8) call it once their inputs are checked, before they calibrate, so that
    the user may stop there and deploy fp32."""
    note = int8_speed_note()
    if note:
        warnings.warn(note)


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
    used: its memory is planned once (static allocation), in one pool all the executors
    share, and each call copies the inputs into the bound arrays.
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
            # Every executor plans its intermediate arrays in one pool, the newest's (which
            # holds the older ones'): photos of two orientations need two executors, and
            # apart they held both plans (an FPN at 600x1000: 1.60 GB against 1.45 GB).
            # Safe as the executors never run at once: the engine orders their writes.
            shared = next(reversed(self._executors.values()), None)
            inputs = {name: mx.nd.zeros(shape, ctx=self.ctx) for name, shape in shapes.items()}
            self._executors[key] = self.symbol.bind(
                self.ctx, dict(self.arg_params, **inputs), aux_states=self.aux_params,
                grad_req="null", shared_exec=shared)
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
