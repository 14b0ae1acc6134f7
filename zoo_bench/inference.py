"""Inference speed of a registered model or a saved artifact on this machine, fp32 and int8,
optionally side by side, in the same process, with the closest GluonCV models or with our
fp32 graph exported to ONNX and run on ONNX Runtime or OpenVINO (``compare``). ``compare``
``all`` times every deployment of ours (MXNet; a checkpoint's bf16 artifact where the CPU
has native bfloat16, made as ``zoo quantize --dtype bf16`` makes it; ONNX Runtime fp32,
OpenVINO fp32 and int8, the deployed ones each in its own process, :mod:`zoo_bench.deployed`)
beside
GluonCV's closest models, and names the fastest at each batch size; given a trained
checkpoint and a dataset split, also what the fastest costs in accuracy
(:mod:`zoo_bench.accuracy`).

Each measurement is images/s, the median latency per batch after warm-up, GFLOPs per image
(of the fp32 graph: the work, whatever the precision) and the fraction of this machine's
peak for its precision, both measured in the same run: a large fp32 matrix multiply for fp32
rows, a large uint8 x int8 one for int8 rows. Our graphs run as deployed
(:class:`zoo.predictor.Predictor`: MKL-DNN fused, bound once); GluonCV's models run hybridized
with static allocation, on the same input (a Faster R-CNN's ``data_shape x max_size``).
``int8`` quantizes the model's fresh parameters with naive calibration on the benchmark
input: the speed of int8, not its accuracy (``zoo quantize`` calibrates on real images).
``profile`` adds where the time of each of our graphs goes (:mod:`zoo_bench.profile`).
"""
import os
import tempfile
from dataclasses import dataclass, replace
from typing import Callable, Optional, Tuple

import mxnet as mx
import numpy as np

from zoo import artifact
from zoo.predictor import Predictor, bf16_unavailable
from zoo.engine.precision import bf16_inference_graph, check_dtype
from zoo.errors import OptionsError
from zoo_bench.options import COMPARISONS, DTYPES, BenchmarkOptions
from zoo_bench.accuracy import calibration_batches, format_cost, format_score, score
from zoo_bench.flops import count_flops
from zoo_bench.timing import Stopwatch, median_seconds, print_line
from zoo.inference.quantization import quantize
from zoo.model import get_model
from zoo_bench.profile import PartProfile, format_profile, part_gflops, profile_graph

__all__ = ["BenchmarkOptions", "COMPARISONS", "DTYPES", "GLUONCV_MODELS", "Measurement",
           "SpeedRatio", "Subject", "benchmark", "best_of", "bf16_matmul_peak_gflops",
           "checkpoint_subject", "int8_matmul_peak_gops", "matmul_peak_gflops",
           "measure", "naive_int8", "network_subjects", "openvino_session", "plot", "print_line",
           "random_images", "ratio_table", "speed_ratios"]

# GluonCV's closest models to each of ours, every one timed by --compare gluoncv
GLUONCV_MODELS = {
    "ssd_resnet50": ("ssd_512_resnet50_v1_voc",),
    "ssd_mobilenetv2": ("ssd_512_mobilenet1.0_voc",),
    "faster_rcnn_resnet50": ("faster_rcnn_resnet50_v1b_voc",),
    "faster_rcnn_resnet101": ("faster_rcnn_resnet101_v1d_voc",),
    "faster_rcnn_fpn_resnet50": ("faster_rcnn_resnet50_v1b_voc",
                                 "faster_rcnn_fpn_resnet50_v1b_coco"),
    "faster_rcnn_fpn_resnet101": ("faster_rcnn_resnet101_v1d_voc",
                                  "faster_rcnn_fpn_resnet101_v1d_coco"),
    # the models zoo import-gluoncv builds, against the very network they import
    "ssd_resnet50_v1_gluoncv_voc": ("ssd_512_resnet50_v1_voc",),
    "ssd_resnet50_v1_gluoncv_coco": ("ssd_512_resnet50_v1_coco",),
    "faster_rcnn_resnet50_gluoncv_voc": ("faster_rcnn_resnet50_v1b_voc",),
    "faster_rcnn_resnet50_gluoncv_coco": ("faster_rcnn_resnet50_v1b_coco",),
    "faster_rcnn_fpn_resnet50_gluoncv_coco": ("faster_rcnn_fpn_resnet50_v1b_coco",),
}
BF16_ORDERS = ((False, "(convert, fuse)"), (True, "(fuse, convert)"))
"""The two orders a bf16 graph is timed in (:func:`zoo.engine.precision.bf16_inference_graph`):
whichever MXNet's MKL-DNN backend runs faster."""
PEAK_PROBES = 3
"""Runs of the bf16 peak probe, the best kept."""


@dataclass(frozen=True)
class Subject:
    """One graph to time: ``run(batch_size)`` returns a callable that runs one batch."""
    side: str       # "ours fp32", "ours int8" or "gluoncv fp32"
    name: str       # what runs, e.g. "ssd_resnet50 512x512"
    run: Callable[[int], Callable[[], object]]
    gflops: float   # per image
    params: int
    graph: Optional[Tuple] = None   # ours: (symbol, arg_params, aux_params), for profiling
    # latency(batch_size, runs, warmup) where the subject times itself (in its own process)
    latency: Optional[Callable[[int, int, int], float]] = None

    @property
    def precision(self):
        return self.side.split()[-1]

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
    precision: str            # "fp32" or "int8"
    peak_fraction: float      # of the machine's measured peak of that precision
    params: int


@dataclass(frozen=True)
class SpeedRatio:
    """Images/s of one of ours over a ``reference``'s (GluonCV's, or an ONNX runtime's), at
    one batch size."""
    subject: str
    reference: str
    batch_size: int
    ratio: float


@dataclass(frozen=True)
class BenchmarkResult:
    peak_gflops: float                 # fp32
    int8_peak_gops: Optional[float]    # measured when an int8 graph is timed
    measurements: Tuple[Measurement, ...]
    ratios: Tuple[SpeedRatio, ...]
    profiles: Tuple[PartProfile, ...]  # of each of ours, with ``profile``
    plot: Optional[str]
    fastest: Tuple[Measurement, ...] = ()  # compare all: the fastest of ours per batch size
    bf16_peak_gflops: Optional[float] = None   # measured when a bf16 graph is timed
    scores: Tuple = ()                 # with a dataset: a zoo_bench.accuracy.Score per side


def _giga_ops_per_s(multiply, size, seconds):
    """Rate of ``multiply()``, a ``size``-square matrix product, run for ``seconds``."""
    multiply()
    runs, watch = 0, Stopwatch()
    while watch() < seconds:
        multiply()
        runs += 1
    return 2 * size ** 3 * runs / watch() / 1e9


def matmul_peak_gflops(size=2048, seconds=2.0):
    """Measured fp32 GFLOP/s of a large matrix multiply through MKL-DNN (``FullyConnected``;
    ``mx.nd.dot`` goes to OpenBLAS, which is slower here): the machine's practical peak."""
    a = mx.nd.random.uniform(shape=(size, size))

    def multiply():
        mx.nd.FullyConnected(a, a, num_hidden=size, no_bias=True).wait_to_read()
    return _giga_ops_per_s(multiply, size, seconds)


def bf16_matmul_peak_gflops(size=2048, seconds=2.0):
    """Measured bfloat16 GFLOP/s of a large matrix multiply (MKL-DNN's ``FullyConnected`` on
    bfloat16 arrays, as AMP-converted layers run; fp32 accumulation): the bf16 peak."""
    from mxnet.contrib.amp.amp import bfloat16
    a = mx.nd.random.uniform(shape=(size, size)).astype(bfloat16)

    def multiply():
        mx.nd.FullyConnected(a, a, num_hidden=size, no_bias=True).wait_to_read()
    return _giga_ops_per_s(multiply, size, seconds)


def best_of(probe, runs, **kwargs):
    """The highest of ``runs`` calls of a peak ``probe``: on a machine shared with other
    work a single probe can read a tenth of the peak."""
    return max(probe(**kwargs) for _ in range(runs))


def int8_matmul_peak_gops(size=2048, seconds=2.0):
    """Measured int8 GOP/s of a large uint8 x int8 matrix multiply (MKL-DNN's quantized
    ``FullyConnected``, int32 accumulation, as quantized layers run): the int8 peak."""
    data = mx.nd.random.randint(0, 128, shape=(size, size)).astype("uint8")
    weight = mx.nd.random.randint(-127, 128, shape=(size, size)).astype("int8")
    low, high = mx.nd.array([-1.0]), mx.nd.array([1.0])

    def multiply():
        mx.nd.contrib.quantized_fully_connected(
            data, weight, low, high, low, high, num_hidden=size, no_bias=True)[0].wait_to_read()
    return _giga_ops_per_s(multiply, size, seconds)


def random_images(shape, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def predictor_subject(side, name, model, symbol, arg_params, aux_params):
    """A :class:`Subject` running ``symbol`` as deployed on random images."""
    predictor = Predictor(symbol, arg_params, aux_params)

    def run(batch_size):
        inputs = model.input_arrays(random_images(model.input_shapes(batch_size)["data"]))
        return lambda: [output.wait_to_read() for output in predictor(**inputs)]
    return Subject(side, name, run, *_work(model), (symbol, arg_params, aux_params))


def _work(model):
    """``(GFLOPs per image, parameters)`` of the model's fp32 graph, whatever runs it."""
    return count_flops(model.symbol(), **model.input_shapes(1)) / 1e9, model.num_params()


def _input_size(model):
    return "x".join(str(s) for s in model.input_shapes()["data"][2:])


def checkpoint_subject(prefix, epoch=None):
    """``(model, subject)`` of a saved artifact, run with its own (fp32, int8 or bf16)
    graph."""
    saved = artifact.load(prefix, epoch)
    name = "%s-%04d %s" % (os.path.basename(prefix), saved.epoch, _input_size(saved.model))
    return saved.model, predictor_subject("ours " + saved.precision["dtype"], name,
                                          saved.model, saved.symbol, saved.arg_params,
                                          saved.aux_params)


def naive_int8(model, arg_params, aux_params):
    """The model's graph and parameters quantized with naive calibration on random input."""
    inputs = model.input_arrays(random_images(model.input_shapes(2)["data"]))
    calib = mx.io.NDArrayIter({k: mx.nd.array(v) for k, v in inputs.items()}, batch_size=1)
    return quantize(model.symbol(), arg_params, aux_params, calib, "naive")


def network_subjects(options):
    """``(model, subjects)``: the fresh registered model, one subject per dtype."""
    sizes = {"data_shape": options.data_shape, "max_size": options.max_size}
    model = get_model(options.network, num_classes=options.num_classes,
                      **{field: value for field, value in sizes.items() if value})
    arg_params, aux_params = model.init_params(seed=0)
    subjects = []
    name = "%s %s" % (options.network, _input_size(model))
    for dtype in options.dtypes:
        if dtype == "bf16":
            subjects += bf16_subjects(model, name, arg_params, aux_params)
            continue
        graph = ((model.symbol(), arg_params, aux_params) if dtype == "fp32"
                 else naive_int8(model, arg_params, aux_params))
        subjects.append(predictor_subject("ours " + dtype, name, model, *graph))
    return model, subjects


def bf16_subjects(model, name, arg_params, aux_params):
    """The model's graph in bfloat16 in each of :data:`BF16_ORDERS` (fp32 parameters, cast
    by the graph), as subjects named by their order."""
    return [predictor_subject("ours bf16", "%s %s" % (name, order), model,
                              *bf16_inference_graph(model.symbol(), arg_params, aux_params,
                                                    model.input_shapes(1), fuse_first))
            for fuse_first, order in BF16_ORDERS]


def gluoncv_names(network):
    """GluonCV's models closest to our ``network``."""
    if network not in GLUONCV_MODELS:
        raise OptionsError("no GluonCV counterpart for %s; known: %s"
                           % (network, ", ".join(GLUONCV_MODELS)))
    return GLUONCV_MODELS[network]


def _initialized_gluoncv(name, num_classes):
    """GluonCV's model ``name``, untrained, with ``num_classes`` classes."""
    from gluoncv import model_zoo

    net = model_zoo.get_model(name, pretrained=False, pretrained_base=False)
    for param_name, param in net.collect_params().items():
        # GluonCV's SSD feature expander and FPN layers leave their BatchNorm parameters
        # and biases without an initializer, and Gluon would give them Xavier's, which
        # needs 2-D arrays.
        if param.init is None and param_name.endswith(("gamma", "beta", "moving_mean",
                                                       "moving_var", "bias")):
            param.init = (mx.init.One() if param_name.endswith(("gamma", "var"))
                          else mx.init.Zero())
    net.initialize(mx.init.Xavier())
    if num_classes != len(net.classes):   # after initialize: Faster R-CNN's needs it
        net.reset_class([str(i) for i in range(num_classes)])
    return net


def gluoncv_subject(name, model, num_classes, dtype="fp32"):
    """GluonCV's model ``name``, hybridized with static allocation, on our input size; int8
    as GluonCV's own int8 models are made: MXNet's ``quantize_net`` (MKL-DNN), here with
    naive calibration on the benchmark input."""
    net = _initialized_gluoncv(name, num_classes)
    one = model.input_shapes(1)["data"]
    net(mx.nd.array(random_images(one)))
    params = sum(int(np.prod(p.shape)) for p in net.collect_params().values()
                 if p.grad_req != "null")
    gflops = count_flops(net(mx.sym.var("data"))[0], data=one) / 1e9
    net.hybridize(static_alloc=True, static_shape=True)
    if dtype == "int8":
        net = _gluoncv_int8(net, model)

    def run(batch_size):
        data = mx.nd.array(random_images(model.input_shapes(batch_size)["data"]))
        return lambda: [output.wait_to_read() for output in net(data)]
    return Subject("gluoncv " + dtype, "%s %s" % (name, _input_size(model)), run, gflops,
                   params)


def _gluoncv_int8(net, model):
    """``net`` quantized by MXNet's ``quantize_net``, calibrated on one random batch."""
    from mxnet.contrib.quantization import quantize_net
    data = mx.nd.array(random_images(model.input_shapes(1)["data"]))
    net(data)
    return quantize_net(net, quantized_dtype="auto", calib_mode="naive",
                        calib_data=mx.io.NDArrayIter(data, batch_size=1),
                        num_calib_examples=1, ctx=mx.cpu())


def onnxruntime_session(path):
    """``run(inputs) -> outputs`` of the ONNX file on ONNX Runtime's CPU provider."""
    import onnxruntime
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda inputs: session.run(None, inputs)


def openvino_session(path):
    """``run(inputs) -> outputs`` of the ONNX file on OpenVINO's CPU plugin in fp32 (its
    default on CPUs with bf16 units is bf16, which moves scores by about 3e-4)."""
    from zoo.onnx.openvino_runtime import shared_core
    try:
        core = shared_core()
    except ImportError:
        raise OptionsError("--compare openvino needs OpenVINO: pip install openvino") from None
    compiled = core.compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return lambda inputs: compiled(inputs)


ONNX_RUNTIMES = {"onnxruntime": onnxruntime_session, "openvino": openvino_session}


def onnx_subject(runtime, model, arg_params, aux_params, scratch):
    """Our fp32 graph exported to ONNX (into the folder ``scratch``), on ``runtime`` (a key
    of :data:`ONNX_RUNTIMES`) with its default threads, on the same random images as ours."""
    from zoo.onnx.export import export_model
    path = export_model(model, arg_params, aux_params, os.path.join(scratch, "model.onnx"))
    session = ONNX_RUNTIMES[runtime](path)

    def run(batch_size):
        inputs = model.input_arrays(random_images(model.input_shapes(batch_size)["data"]))
        return lambda: session(inputs)
    return Subject(runtime + " fp32", "%s %s" % (model.name, _input_size(model)), run,
                   *_work(model))


def reference_subjects(options, model, ours, scratch):
    """The subjects ours are compared with: GluonCV's closest models, or our fp32 graph
    exported to ONNX on ONNX Runtime or OpenVINO."""
    if options.compare == "all" and (options.network or model.name) not in GLUONCV_MODELS:
        return []  # all deployments of ours are still timed; GluonCV has no counterpart
    if options.compare in ("gluoncv", "all"):
        dtypes = ("fp32", "int8") if options.compare == "all" else ("fp32",)
        return [gluoncv_subject(name, model, model.config["num_classes"], dtype)
                for name in gluoncv_names(options.network or model.name) for dtype in dtypes]
    if options.compare in ONNX_RUNTIMES:
        return [onnx_subject(options.compare, model, *fp32_graph(options, ours)[1:], scratch)]
    return []


def fp32_graph(options, ours):
    """``(symbol, arg_params, aux_params)`` of our fp32 subject, which exports are made of."""
    fp32 = [subject.graph for subject in ours if subject.precision == "fp32"]
    if not fp32:
        raise OptionsError("--compare %s runs the fp32 graph: time an fp32 artifact, or "
                           "a network with fp32 among the dtypes" % options.compare)
    return fp32[0]


def deployed_subjects(options, model, ours, scratch):
    """With ``compare`` all: ``(subjects, files)``, our fp32 graph deployed on each runtime
    of :data:`zoo_bench.deployed.DEPLOYED_SIDES` (``{side: file}``), timed each in its own
    process on the same random images as ours."""
    from zoo_bench.deployed import deployed_graphs, isolated_latency
    if options.compare != "all":
        return [], {}
    inputs = {batch_size: model.input_arrays(random_images(model.input_shapes(batch_size)["data"]))
              for batch_size in options.batch_sizes}
    onnx_path = fp32_export(options, model, ours, os.path.join(scratch, "fp32.onnx"))
    split = options.data_split(options.calib_split)
    calibration = ([inputs[max(options.batch_sizes)]] if split is None else
                   calibration_batches(onnx_path, split, options.calib_images))
    files = deployed_graphs(onnx_path, calibration, scratch)
    name = "%s %s" % (model.name, _input_size(model))
    return [Subject(side, name, None, *_work(model), latency=isolated_latency(path, inputs))
            for side, path in files.items()], files


def bf16_artifact_subjects(options, ours, scratch):
    """With ``compare`` all on an fp32 checkpoint, where the CPU runs bfloat16 natively:
    ``(subjects, {side: prefix})``, the checkpoint's bf16 artifact, written into the folder
    ``scratch`` by ``zoo quantize --dtype bf16``'s job and run as saved (scored as saved too,
    where a dataset is given)."""
    if options.compare != "all" or not options.checkpoint or ours[0].precision != "fp32" \
            or bf16_unavailable():
        return [], {}
    from zoo.jobs.quantize import QuantizeOptions, quantize
    output = os.path.join(scratch, os.path.basename(options.checkpoint) + "-bf16")
    prefix = quantize(QuantizeOptions(options.checkpoint, epoch=options.epoch, dtype="bf16",
                                      output=output)).prefix
    subject = checkpoint_subject(prefix)[1]
    return [subject], {subject.side: prefix}


def fp32_export(options, model, ours, path):
    """Our fp32 graph written to the ONNX file ``path``: a checkpoint's with its own class
    names and preprocessing, which scoring it on a dataset needs."""
    from zoo.onnx.export import export_artifact, export_model
    graph = fp32_graph(options, ours)
    if options.checkpoint:
        return export_artifact(artifact.load(options.checkpoint, options.epoch), path)
    return export_model(model, *graph[1:], path)


def measure(subject, batch_size, runs, warmup, peaks):
    """The :class:`Measurement` of ``subject`` at ``batch_size``; ``peaks`` are the
    machine's GFLOP/s by precision."""
    latency = (subject.latency(batch_size, runs, warmup) if subject.latency
               else median_seconds(subject.run(batch_size), runs, warmup))
    rate = batch_size / latency
    return Measurement(subject.label, batch_size, latency, rate, subject.gflops,
                       subject.precision, subject.gflops * rate / peaks[subject.precision],
                       subject.params)


def format_measurement(m):
    return ("%-56s batch %2d %8.3f s/batch %8.2f img/s %7.1f GFLOPs/img %6.1f%% of %s peak "
            "%12s params" % (m.subject, m.batch_size, m.latency_s, m.images_per_s,
                             m.gflops_per_image, 100 * m.peak_fraction, m.precision,
                             "{:,}".format(m.params)))


def speed_ratios(ours, references, measured, batch_size):
    """A :class:`SpeedRatio` of each of ``ours`` against each of ``references`` (subjects),
    from ``measured`` (:class:`Measurement` by subject label) at ``batch_size``."""
    return [SpeedRatio(subject.label, reference.label, batch_size,
                       measured[subject.label].images_per_s
                       / measured[reference.label].images_per_s)
            for subject in ours for reference in references]


def ratio_table(ratios):
    """Lines of a table of ``ratios``: a row per subject and batch size, a column per
    reference."""
    references = list(dict.fromkeys(r.reference for r in ratios))
    rows = {}
    for r in ratios:
        rows.setdefault((r.subject, r.batch_size), {})[r.reference] = r.ratio
    lines = ["speed ratios (images/s of ours over each reference's):"]
    lines += ["  reference %d: %s" % (i + 1, name) for i, name in enumerate(references)]
    lines.append("  %-56s %5s" % ("ours", "batch")
                 + "".join("%10s" % ("ref %d" % (i + 1)) for i in range(len(references))))
    for (subject, batch_size), row in rows.items():
        lines.append("  %-56s %5d" % (subject, batch_size) + "".join(
            "%9.2fx" % row[name] if name in row else "%10s" % "-" for name in references))
    return lines


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


def measure_peaks(subjects):
    """``{precision: GFLOP/s}``: the fp32 peak, and the int8 one when an int8 graph is
    among ``subjects``."""
    peaks = {"fp32": matmul_peak_gflops()}
    if any(subject.precision == "int8" for subject in subjects):
        peaks["int8"] = int8_matmul_peak_gops()
    if any(subject.precision == "bf16" for subject in subjects):
        peaks["bf16"] = best_of(bf16_matmul_peak_gflops, PEAK_PROBES)
    return peaks


def format_peaks(peaks):
    int8 = (", int8 matmul peak %.1f GOP/s (%.1fx)" % (peaks["int8"], peaks["int8"] / peaks["fp32"])
            if "int8" in peaks else "")
    int8 += (", bf16 matmul peak %.1f GFLOP/s (%.1fx, best of %d)"
             % (peaks["bf16"], peaks["bf16"] / peaks["fp32"], PEAK_PROBES)
             if "bf16" in peaks else "")
    return ("fp32 matmul peak on this machine: %.1f GFLOP/s%s, OMP_NUM_THREADS=%s, %d cores, "
            "MXNet engine %s" % (peaks["fp32"], int8, os.environ.get("OMP_NUM_THREADS"),
                                 len(os.sched_getaffinity(0)),
                                 os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice")))


def profile_subjects(model, subjects, batch_size, runs, log):
    """The :class:`zoo_bench.profile.PartProfile` of each of our ``subjects``, logged."""
    inputs = model.input_arrays(random_images(model.input_shapes(batch_size)["data"]))
    gflops = part_gflops(model.symbol(), model.input_shapes(1))
    profiles = []
    for subject in subjects:
        profiles.append(profile_graph(subject.label, *subject.graph, inputs, gflops, runs))
        for line in format_profile(profiles[-1]):
            log(line)
    return profiles


def benchmark(options, log=print_line):
    """Time every subject at every batch size; each line of the report goes to ``log`` as
    it is measured. Returns a :class:`BenchmarkResult`."""
    # every subject first, so that a bad artifact or network fails before any timing
    if options.checkpoint:
        model, subject = checkpoint_subject(options.checkpoint, options.epoch)
        ours = [subject]
    else:
        model, ours = network_subjects(options)
    with tempfile.TemporaryDirectory() as scratch:
        deployed, files = deployed_subjects(options, model, ours, scratch)
        converted, prefixes = bf16_artifact_subjects(options, ours, scratch)
        ours = ours + converted + deployed
        files = dict(prefixes, **files)
        references = reference_subjects(options, model, ours, scratch)
        result = _measured(options, model, ours, references, log)
        if options.data_split() is None:
            return result
        return replace(result, scores=accuracy(options, ours[0].side, files, result.fastest,
                                               scratch, log))


def accuracy(options, side, files, fastest, scratch, log):
    """The :class:`zoo_bench.accuracy.Score` of the checkpoint (``side``) and of each other
    deployment (``files``: a deployed file or an artifact prefix by side) on the options'
    split, logged, then what each of the ``fastest`` measurements gives up; returns the
    scores."""
    split = options.data_split()
    scores = [score(side, options.checkpoint, options.epoch, split, scratch)]
    scores += [score(name, path, None, split, scratch) for name, path in files.items()]
    for s in scores:
        log(format_score(s, split))
    for m in fastest:
        log(format_cost(m.batch_size, m.subject.split(":")[0], scores))
    return tuple(scores)


def fastest_of(ours, measurements):
    """The fastest of ``ours`` (subjects) at each batch size, among ``measurements``."""
    labels = {subject.label for subject in ours}
    best = {}
    for m in measurements:
        if m.subject in labels and (m.batch_size not in best
                                    or m.images_per_s > best[m.batch_size].images_per_s):
            best[m.batch_size] = m
    return tuple(best.values())


def format_fastest(m):
    return ("fastest at batch %d on this machine: %s, %.2f img/s (%.3f s/batch, %.1f%% of the "
            "%s peak)" % (m.batch_size, m.subject, m.images_per_s, m.latency_s,
                          100 * m.peak_fraction, m.precision))


def last_line(error):
    """The last line of an MXNet error, the one that says what failed."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1].replace("MXNetError: ", "", 1) if lines else type(error).__name__


def _measured(options, model, ours, references, log):
    """Measure ``ours`` and ``references`` at each batch size. A reference that MXNet cannot
    run (GluonCV's FPN under ``quantize_net``; GluonCV's Faster R-CNNs at a batch above 1) is
    named in one line and left out from then on, so that the others are still compared; one
    of ours that fails stops the benchmark."""
    left_out = set()
    peaks = measure_peaks(ours)
    log(format_peaks(peaks))
    measurements, ratios = [], []
    for batch_size in options.batch_sizes:
        measured = {}
        for subject in ours + references:
            if subject in references and subject.label in left_out:
                continue
            try:
                measured[subject.label] = measure(subject, batch_size, options.runs,
                                                  options.warmup, peaks)
            except mx.base.MXNetError as err:
                if subject not in references:
                    raise
                left_out.add(subject.label)
                log("%s: cannot run at batch %d (%s); left out"
                    % (subject.label, batch_size, last_line(err)))
                continue
            log(format_measurement(measured[subject.label]))
        measurements.extend(measured.values())
        ratios.extend(speed_ratios(ours, [r for r in references if r.label in measured],
                                   measured, batch_size))
    if ratios:
        for line in ratio_table(ratios):
            log(line)
    profiles = ()
    if options.profile:
        profiles = tuple(profile_subjects(model, [s for s in ours if s.graph is not None],
                                          options.batch_sizes[0], options.runs, log))
    written = None
    if options.plot:
        written = plot(options.plot, list(options.batch_sizes), measurements)
        log("plot written to %s" % written)
    fastest = fastest_of(ours, measurements) if options.compare == "all" else ()
    for m in fastest:
        log(format_fastest(m))
    return BenchmarkResult(peaks["fp32"], peaks.get("int8"), tuple(measurements),
                           tuple(ratios), profiles, written, fastest,
                           bf16_peak_gflops=peaks.get("bf16"))
