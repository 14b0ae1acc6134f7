#!/usr/bin/env python
"""Inference speed of a registered model or a saved checkpoint on this machine, fp32 and
int8, optionally side by side with the closest GluonCV model in the same process.

Prints images/s, median latency per batch after warm-up, GFLOPs per image (of the
fp32 graph: the work, whatever the precision) and the fraction of this machine's
measured fp32 matrix-multiply peak; with ``--compare gluoncv`` the same for
GluonCV's model, hybridized with static allocation, and each of ours against it.
Our graphs run as deployed (:class:`zoo.deploy.Predictor`): MKL-DNN fused, bound once.
``--dtypes int8`` quantizes the model's fresh parameters with naive calibration
on the benchmark input: the speed of int8, not its accuracy (tools/quantize.py
calibrates a trained model on real images).

Examples:
    python tools/benchmark.py --network ssd_resnet50 --dtypes fp32,int8 --compare gluoncv
    python tools/benchmark.py --checkpoint output/train/ssd_mobilenetv2_stride8-int8
    python tools/benchmark.py --network ssd_resnet50 --dtypes fp32,int8 --compare gluoncv \\
        --batch-sizes 1,2,4,8 --plot throughput.png
"""
import zoo  # noqa: I001  first: it sets OpenMP's thread count, read once when MXNet loads
import argparse
import os
import statistics
import sys
import time

import mxnet as mx
import numpy as np
from zoo import checkpoint
from zoo.deploy import Predictor
from zoo.flops import count_flops
from zoo.quantization import quantize

GLUONCV_MODELS = {
    "ssd_resnet50": "ssd_512_resnet50_v1_voc",
    "ssd_mobilenetv2": "ssd_512_mobilenet1.0_voc",
    "faster_rcnn_resnet50": "faster_rcnn_resnet50_v1b_voc",
    "faster_rcnn_resnet101": "faster_rcnn_resnet101_v1d_voc",
}
DTYPES = ("fp32", "int8")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--network", choices=zoo.list_models())
    source.add_argument("--checkpoint", help="a saved checkpoint prefix (fp32 or int8), run "
                        "with its own graph, parameters and data shape")
    p.add_argument("--data-shape", type=int, default=None, help="default: the config's")
    p.add_argument("--dtypes", default="fp32", help="comma-separated: fp32, int8")
    p.add_argument("--batch-sizes", default="1", help="comma-separated batch sizes")
    p.add_argument("--runs", type=int, default=5, help="timed runs (the median is reported)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--compare", choices=("gluoncv",), default=None)
    p.add_argument("--num-classes", type=int, default=20, help="VOC's 20, as GluonCV's models")
    p.add_argument("--plot", default=None, help="PNG of images/s against batch size")
    args = p.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    if not args.dtypes or set(args.dtypes) - set(DTYPES):
        p.error("--dtypes takes a comma-separated subset of %s" % ", ".join(DTYPES))
    try:
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    except ValueError:
        p.error("--batch-sizes takes comma-separated integers")
    if not args.batch_sizes or min(args.batch_sizes) < 1 or args.runs < 1:
        p.error("batch sizes and --runs must be at least 1")
    if args.checkpoint and (args.data_shape or args.dtypes != ["fp32"]):
        p.error("a checkpoint runs as saved: no --data-shape or --dtypes with --checkpoint")
    return args


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


class Subject:
    """One graph to time: ``run(batch_size)`` runs a batch; figures per image."""

    def __init__(self, label, run, gflops, params):
        self.label, self.run, self.gflops, self.params = label, run, gflops, params


def random_images(shape, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def predictor_subject(label, model, symbol, arg_params, aux_params):
    """A :class:`Subject` running ``symbol`` as deployed on random images."""
    predictor = Predictor(symbol, arg_params, aux_params)

    def run(batch_size):
        inputs = model.input_arrays(random_images(model.input_shapes(batch_size)["data"]))
        return lambda: [output.wait_to_read() for output in predictor(**inputs)]
    return Subject(label, run, count_flops(model.symbol(), **model.input_shapes(1)) / 1e9,
                   model.num_params())


def our_subjects(args):
    """The graphs of ours to time, one per dtype (or the checkpoint's)."""
    if args.checkpoint:
        model, arg_params, aux_params, meta = checkpoint.load_model(args.checkpoint)
        dtype = "int8" if meta.get("quantization") else "fp32"
        label = "ours %s: %s %s" % (dtype, os.path.basename(args.checkpoint),
                                    _side(model.input_shapes()))
        return model, [predictor_subject(label, model, checkpoint.load_symbol(args.checkpoint),
                                         arg_params, aux_params)]
    overrides = {"num_classes": args.num_classes}
    if args.data_shape:
        overrides["data_shape"] = args.data_shape
    model = zoo.get_model(args.network, **overrides)
    arg_params, aux_params = model.init_params(seed=0)
    subjects = []
    for dtype in args.dtypes:
        symbol, args_, aux = model.symbol(), arg_params, aux_params
        if dtype == "int8":
            inputs = model.input_arrays(random_images(model.input_shapes(2)["data"]))
            calib = mx.io.NDArrayIter({k: mx.nd.array(v) for k, v in inputs.items()},
                                      batch_size=1)
            symbol, args_, aux = quantize(symbol, arg_params, aux_params, calib, "naive")
        label = "ours %s: %s %s" % (dtype, args.network, _side(model.input_shapes()))
        subjects.append(predictor_subject(label, model, symbol, args_, aux))
    return model, subjects


def _side(shapes):
    return "x".join(str(s) for s in shapes["data"][2:])


def gluoncv_subject(network, model, num_classes):
    """The closest GluonCV model, hybridized with static allocation, on our input size."""
    from gluoncv import model_zoo

    name = GLUONCV_MODELS.get(network)
    if name is None:
        raise SystemExit("no GluonCV counterpart for %s; known: %s"
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
    return Subject("gluoncv fp32: %s" % name, run, gflops, params)


def measure(subject, batch_size, runs, warmup, peak):
    """Time ``subject`` at ``batch_size``, print its line and return images/s."""
    latency = median_latency(subject.run(batch_size), runs, warmup)
    rate = batch_size / latency
    print("%-44s batch %2d %8.3f s/batch %8.2f img/s %7.1f GFLOPs/img %6.1f%% of fp32 peak "
          "%12s params" % (subject.label, batch_size, latency, rate, subject.gflops,
                           100 * subject.gflops * rate / peak, "{:,}".format(subject.params)),
          flush=True)
    return rate


def plot(path, batch_sizes, rates):
    """Images/s against batch size, one line per subject."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

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
    return path


def main(argv=None):
    args = parse_args(argv)
    peak = matmul_peak_gflops()
    print("fp32 matmul peak on this machine: %.1f GFLOP/s, OMP_NUM_THREADS=%s, %d cores" % (
        peak, os.environ.get("OMP_NUM_THREADS"), len(os.sched_getaffinity(0))))
    model, subjects = our_subjects(args)
    reference = None
    if args.compare:
        network = args.network or model.name
        reference = gluoncv_subject(network, model, model.config["num_classes"])
        subjects.append(reference)
    rates = {subject.label: [] for subject in subjects}
    for batch_size in args.batch_sizes:
        for subject in subjects:
            rates[subject.label].append(measure(subject, batch_size, args.runs, args.warmup,
                                                peak))
        if reference is not None:
            for subject in subjects[:-1]:
                print("speed ratio %s / gluoncv fp32 at batch %d: %.2fx" % (
                    subject.label.split(":")[0], batch_size,
                    rates[subject.label][-1] / rates[reference.label][-1]))
    if args.plot:
        print("plot written to %s" % plot(args.plot, args.batch_sizes, rates))
    return 0


if __name__ == "__main__":
    sys.exit(main())
