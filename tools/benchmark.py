#!/usr/bin/env python
"""Inference speed of a registered model on this machine, optionally side by side with
the closest GluonCV model, in the same process on the same input.

Prints images/s, median latency per batch after warm-up, GFLOPs per image and the
fraction of this machine's measured fp32 matrix-multiply peak; with
``--compare gluoncv`` the same for GluonCV's model and the speed ratio.

Example:
    python tools/benchmark.py --network faster_rcnn_resnet50 --compare gluoncv
"""
import argparse
import statistics
import sys
import time

import mxnet as mx
import numpy as np

import zoo
from zoo.flops import count_flops

GLUONCV_MODELS = {
    "ssd_resnet50": "ssd_512_resnet50_v1_voc",
    "ssd_mobilenetv2": "ssd_512_mobilenet1.0_voc",
    "faster_rcnn_resnet50": "faster_rcnn_resnet50_v1b_voc",
    "faster_rcnn_resnet101": "faster_rcnn_resnet101_v1d_voc",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--network", required=True, choices=zoo.list_models())
    p.add_argument("--data-shape", type=int, default=None, help="default: the config's")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--runs", type=int, default=5, help="timed runs (the median is reported)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--compare", choices=("gluoncv",), default=None)
    p.add_argument("--num-classes", type=int, default=20, help="VOC's 20, as GluonCV's models")
    return p.parse_args(argv)


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


def ours(args):
    """``(run, gflops per image, params, description)`` of our model."""
    overrides = {"num_classes": args.num_classes}
    if args.data_shape:
        overrides["data_shape"] = args.data_shape
    model = zoo.get_model(args.network, **overrides)
    shapes = model.input_shapes(args.batch_size)
    arg_params, aux_params = model.init_params(seed=0)
    data = np.random.RandomState(0).uniform(-1, 1, shapes["data"]).astype(np.float32)
    inputs = {n: mx.nd.array(a) for n, a in model.input_arrays(data).items()}
    symbol = model.symbol()
    executor = symbol.bind(mx.cpu(), dict(arg_params, **inputs), aux_states=aux_params,
                           grad_req="null")

    def run():
        executor.forward(is_train=False)[0].wait_to_read()
    flops = count_flops(symbol, **shapes) / args.batch_size
    return run, flops / 1e9, model.num_params(), "%s %s" % (args.network, "x".join(
        str(s) for s in shapes["data"][2:])), shapes["data"]


def gluoncv(args, data_shape):
    """The same for the closest GluonCV model, hybridized with static allocation."""
    from gluoncv import model_zoo

    name = GLUONCV_MODELS.get(args.network)
    if name is None:
        raise SystemExit("no GluonCV counterpart for %s; known: %s"
                         % (args.network, ", ".join(GLUONCV_MODELS)))
    net = model_zoo.get_model(name, pretrained=False, pretrained_base=False)
    net.initialize(mx.init.Xavier())
    data = mx.nd.random.uniform(-1, 1, data_shape)
    net(data)
    params = sum(int(np.prod(p.shape)) for p in net.collect_params().values()
                 if p.grad_req != "null")
    flops = count_flops(net(mx.sym.var("data"))[0], data=data_shape) / data_shape[0]
    net.hybridize(static_alloc=True, static_shape=True)

    def run():
        for output in net(data):
            output.wait_to_read()
    return run, flops / 1e9, params, name


def report(label, latency, batch, gflops, params, peak):
    rate = batch / latency
    print("%-34s %8.3f s/batch %8.2f img/s %8.1f GFLOPs/img %6.1f%% of peak %12s params" % (
        label, latency, rate, gflops, 100 * gflops * rate / peak, "{:,}".format(params)))
    return rate


def main(argv=None):
    args = parse_args(argv)
    peak = matmul_peak_gflops()
    print("fp32 matmul peak on this machine: %.1f GFLOP/s, OMP_NUM_THREADS=%s" % (
        peak, __import__("os").environ.get("OMP_NUM_THREADS")))
    run, gflops, params, label, data_shape = ours(args)
    our_rate = report("ours: " + label, median_latency(run, args.runs, args.warmup),
                      args.batch_size, gflops, params, peak)
    if args.compare:
        run, their_gflops, their_params, name = gluoncv(args, data_shape)
        their_rate = report("gluoncv: " + name, median_latency(run, args.runs, args.warmup),
                            args.batch_size, their_gflops, their_params, peak)
        print("speed ratio ours / gluoncv: %.2fx" % (our_rate / their_rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
