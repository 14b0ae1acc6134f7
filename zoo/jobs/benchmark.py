"""Inference speed of a registered model or a saved artifact on this machine, fp32 and int8,
optionally side by side with the closest GluonCV model in the same process.

Each measurement is images/s, the median latency per batch after warm-up, GFLOPs per image
(of the fp32 graph: the work, whatever the precision) and the fraction of this machine's
measured fp32 matrix-multiply peak. Our graphs run as deployed (:class:`zoo.deploy.Predictor`:
MKL-DNN fused, bound once); GluonCV's model runs hybridized with static allocation.
``int8`` quantizes the model's fresh parameters with naive calibration on the benchmark
input: the speed of int8, not its accuracy (``zoo quantize`` calibrates on real images).
"""
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import mxnet as mx
import numpy as np

from .. import artifact
from ..deploy import Predictor
from ..errors import OptionsError
from ..flops import count_flops
from ..quantization import quantize
from ..registry import get_model, list_models

GLUONCV_MODELS = {
    "ssd_resnet50": "ssd_512_resnet50_v1_voc",
    "ssd_mobilenetv2": "ssd_512_mobilenet1.0_voc",
    "faster_rcnn_resnet50": "faster_rcnn_resnet50_v1b_voc",
    "faster_rcnn_resnet101": "faster_rcnn_resnet101_v1d_voc",
}
DTYPES = ("fp32", "int8")
COMPARISONS = ("gluoncv",)


@dataclass(frozen=True)
class BenchmarkOptions:
    """What to time: a registered ``network`` (built fresh, in each of ``dtypes``) or a saved
    ``checkpoint`` (run as saved, with its own graph, parameters and data shape)."""
    network: Optional[str] = None
    checkpoint: Optional[str] = None
    epoch: Optional[int] = None          # of the checkpoint; None: its best, else newest
    data_shape: Optional[int] = None     # None: the config's
    dtypes: Tuple[str, ...] = ("fp32",)
    batch_sizes: Tuple[int, ...] = (1,)
    runs: int = 5                        # timed runs; the median is reported
    warmup: int = 2
    compare: Optional[str] = None        # "gluoncv" or None
    num_classes: int = 20                # VOC's 20, as GluonCV's models
    plot: Optional[str] = None           # PNG of images/s against batch size

    def __post_init__(self):
        if (self.network is None) == (self.checkpoint is None):
            raise OptionsError("give either a network or a checkpoint, not %s"
                             % ("both" if self.network else "neither"))
        if self.network is not None and self.network not in list_models():
            raise OptionsError("unknown network %r; known: %s"
                             % (self.network, ", ".join(list_models())))
        if not self.dtypes or set(self.dtypes) - set(DTYPES):
            raise OptionsError("dtypes must be a non-empty subset of %s, got %s"
                             % (", ".join(DTYPES), ",".join(self.dtypes)))
        if not self.batch_sizes or min(self.batch_sizes) < 1 or self.runs < 1:
            raise OptionsError("batch sizes and runs must be at least 1")
        if self.warmup < 0:
            raise OptionsError("warmup must be >= 0, got %d" % self.warmup)
        if self.compare not in (None,) + COMPARISONS:
            raise OptionsError("compare must be one of %s, got %r"
                             % (", ".join(COMPARISONS), self.compare))
        if self.checkpoint and (self.data_shape or tuple(self.dtypes) != ("fp32",)):
            raise OptionsError("a checkpoint runs as saved: no data shape or dtypes with it")


@dataclass(frozen=True)
class Subject:
    """One graph to time: ``run(batch_size)`` returns a callable that runs one batch."""
    side: str       # "ours fp32", "ours int8" or "gluoncv fp32"
    name: str       # what runs, e.g. "ssd_resnet50 512x512"
    run: Callable[[int], Callable[[], object]]
    gflops: float   # per image
    params: int

    @property
    def label(self):
        return "%s: %s" % (self.side, self.name)


@dataclass(frozen=True)
class Measurement:
    subject: str
    batch_size: int
    latency_s: float          # median per batch
    images_per_s: float
    gflops_per_image: float
    peak_fraction: float      # of the machine's fp32 matmul peak
    params: int


@dataclass(frozen=True)
class SpeedRatio:
    """Images/s of one of ours over GluonCV's, at one batch size."""
    subject: str
    batch_size: int
    ratio: float


@dataclass(frozen=True)
class BenchmarkResult:
    peak_gflops: float
    measurements: Tuple[Measurement, ...]
    ratios: Tuple[SpeedRatio, ...]
    plot: Optional[str]


def print_line(line):
    """The jobs' default report: each line on stdout as soon as it is measured."""
    print(line, flush=True)


def matmul_peak_gflops(size=2048, seconds=2.0):
    """Measured fp32 GFLOP/s of a large matrix multiply through MKL-DNN (``FullyConnected``;
    ``mx.nd.dot`` goes to OpenBLAS, which is slower here): the machine's practical peak."""
    a = mx.nd.random.uniform(shape=(size, size))

    def multiply():
        mx.nd.FullyConnected(a, a, num_hidden=size, no_bias=True).wait_to_read()
    multiply()
    runs, start = 0, time.time()
    while time.time() - start < seconds:
        multiply()
        runs += 1
    return 2 * size ** 3 * runs / (time.time() - start) / 1e9


def median_latency(run, runs, warmup):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        start = time.time()
        run()
        times.append(time.time() - start)
    return statistics.median(times)


def random_images(shape, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def predictor_subject(side, name, model, symbol, arg_params, aux_params):
    """A :class:`Subject` running ``symbol`` as deployed on random images."""
    predictor = Predictor(symbol, arg_params, aux_params)

    def run(batch_size):
        inputs = model.input_arrays(random_images(model.input_shapes(batch_size)["data"]))
        return lambda: [output.wait_to_read() for output in predictor(**inputs)]
    return Subject(side, name, run,
                   count_flops(model.symbol(), **model.input_shapes(1)) / 1e9,
                   model.num_params())


def _input_size(model):
    return "x".join(str(s) for s in model.input_shapes()["data"][2:])


def checkpoint_subject(prefix, epoch=None):
    """``(model, subject)`` of a saved artifact, run with its own (fp32 or int8) graph."""
    saved = artifact.load(prefix, epoch)
    name = "%s-%04d %s" % (os.path.basename(prefix), saved.epoch, _input_size(saved.model))
    return saved.model, predictor_subject("ours int8" if saved.is_int8 else "ours fp32", name,
                                          saved.model, saved.symbol, saved.arg_params,
                                          saved.aux_params)


def naive_int8(model, arg_params, aux_params):
    """The model's graph and parameters quantized with naive calibration on random input."""
    inputs = model.input_arrays(random_images(model.input_shapes(2)["data"]))
    calib = mx.io.NDArrayIter({k: mx.nd.array(v) for k, v in inputs.items()}, batch_size=1)
    return quantize(model.symbol(), arg_params, aux_params, calib, "naive")


def network_subjects(options):
    """``(model, subjects)``: the fresh registered model, one subject per dtype."""
    overrides = {"num_classes": options.num_classes}
    if options.data_shape:
        overrides["data_shape"] = options.data_shape
    model = get_model(options.network, **overrides)
    arg_params, aux_params = model.init_params(seed=0)
    subjects = []
    for dtype in options.dtypes:
        graph = ((model.symbol(), arg_params, aux_params) if dtype == "fp32"
                 else naive_int8(model, arg_params, aux_params))
        name = "%s %s" % (options.network, _input_size(model))
        subjects.append(predictor_subject("ours " + dtype, name, model, *graph))
    return model, subjects


def gluoncv_subject(network, model, num_classes):
    """The closest GluonCV model, hybridized with static allocation, on our input size."""
    from gluoncv import model_zoo

    name = GLUONCV_MODELS.get(network)
    if name is None:
        raise OptionsError("no GluonCV counterpart for %s; known: %s"
                         % (network, ", ".join(GLUONCV_MODELS)))
    net = model_zoo.get_model(name, pretrained=False, pretrained_base=False)
    if num_classes != len(net.classes):
        net.reset_class([str(i) for i in range(num_classes)])
    for param_name, param in net.collect_params().items():
        # GluonCV's SSD feature expander leaves its BatchNorm parameters without an
        # initializer, and Gluon would give them Xavier's, which needs 2-D arrays.
        if param.init is None and param_name.endswith(("gamma", "beta", "moving_mean",
                                                       "moving_var")):
            param.init = (mx.init.One() if param_name.endswith(("gamma", "var"))
                          else mx.init.Zero())
    net.initialize(mx.init.Xavier())
    one = model.input_shapes(1)["data"]
    net(mx.nd.array(random_images(one)))
    params = sum(int(np.prod(p.shape)) for p in net.collect_params().values()
                 if p.grad_req != "null")
    gflops = count_flops(net(mx.sym.var("data"))[0], data=one) / 1e9
    net.hybridize(static_alloc=True, static_shape=True)

    def run(batch_size):
        data = mx.nd.array(random_images(model.input_shapes(batch_size)["data"]))
        return lambda: [output.wait_to_read() for output in net(data)]
    return Subject("gluoncv fp32", name, run, gflops, params)


def measure(subject, batch_size, runs, warmup, peak):
    """The :class:`Measurement` of ``subject`` at ``batch_size``."""
    latency = median_latency(subject.run(batch_size), runs, warmup)
    rate = batch_size / latency
    return Measurement(subject.label, batch_size, latency, rate, subject.gflops,
                       subject.gflops * rate / peak, subject.params)


def format_measurement(m):
    return ("%-44s batch %2d %8.3f s/batch %8.2f img/s %7.1f GFLOPs/img %6.1f%% of fp32 peak "
            "%12s params" % (m.subject, m.batch_size, m.latency_s, m.images_per_s,
                             m.gflops_per_image, 100 * m.peak_fraction, "{:,}".format(m.params)))


def plot(path, batch_sizes, measurements):
    """Images/s against batch size, one line per subject; returns ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    rates = {}
    for m in measurements:
        rates.setdefault(m.subject, []).append(m.images_per_s)
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for label, values in rates.items():
        axes.plot(batch_sizes, values, marker="o", label=label)
    axes.set_xlabel("batch size")
    axes.set_ylabel("images/s")
    axes.set_xticks(batch_sizes)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path


def benchmark(options, log=print_line):
    """Time every subject at every batch size; each line of the report goes to ``log`` as
    it is measured. Returns a :class:`BenchmarkResult`."""
    # every subject first, so that a bad artifact or network fails before any timing
    if options.checkpoint:
        model, subject = checkpoint_subject(options.checkpoint, options.epoch)
        ours = [subject]
    else:
        model, ours = network_subjects(options)
    reference = None
    if options.compare == "gluoncv":
        reference = gluoncv_subject(options.network or model.name, model,
                                    model.config["num_classes"])
    peak = matmul_peak_gflops()
    log("fp32 matmul peak on this machine: %.1f GFLOP/s, OMP_NUM_THREADS=%s, %d cores" % (
        peak, os.environ.get("OMP_NUM_THREADS"), len(os.sched_getaffinity(0))))
    measurements, ratios = [], []
    for batch_size in options.batch_sizes:
        measured = {}
        for subject in ours + ([reference] if reference else []):
            measured[subject.label] = measure(subject, batch_size, options.runs,
                                              options.warmup, peak)
            log(format_measurement(measured[subject.label]))
        measurements.extend(measured.values())
        if reference is not None:
            for subject in ours:
                ratio = SpeedRatio(subject.label, batch_size,
                                   measured[subject.label].images_per_s
                                   / measured[reference.label].images_per_s)
                ratios.append(ratio)
                log("speed ratio %s / %s at batch %d: %.2fx" % (
                    subject.side, reference.side, batch_size, ratio.ratio))
    written = None
    if options.plot:
        written = plot(options.plot, list(options.batch_sizes), measurements)
        log("plot written to %s" % written)
    return BenchmarkResult(peak, tuple(measurements), tuple(ratios), written)

