#!/usr/bin/env python
"""Peak memory and step time of training with and without --memory-saving.

Each configuration runs in a fresh process, since a process has one peak: it binds the
training graph of --network as tools/train.py does, runs --warmup and then --steps
training steps (forward, backward and SGD update) on one batch of random images with a
few random boxes each, and reports the size of MXNet's planned intermediate arrays, the
process's peak resident memory (ru_maxrss), the median step time (wall clock and CPU)
and the loss of the first step (the same parameters and batch everywhere, so equal
losses show that the math is unchanged); then each configuration's ratios to plain.
Configurations:

    plain          the training graph as it is
    mxnet-mirror   MXNET_BACKWARD_DO_MIRROR=1: MXNet recomputes all but convolutions
    memory-saving  what tools/train.py --memory-saving binds (zoo.memory)

Example:
    python tools/benchmark_memory.py --network ssd_resnet101 --data-shape 512 --batch-size 8
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import mxnet as mx
import numpy as np

import zoo
from zoo.memory import MemoryPlanner, memory_saving_symbol

CONFIGURATIONS = {
    "plain": {},
    "mxnet-mirror": {"MXNET_BACKWARD_DO_MIRROR": "1"},
    "memory-saving": {},
}
LABEL_ROWS = 8
BOXES_PER_IMAGE = 4


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--network", default="ssd_resnet101", choices=zoo.list_models(),
                   metavar="NAME", help="registered model: %s" % ", ".join(zoo.list_models()))
    p.add_argument("--data-shape", type=int, default=None, help="default: the config's")
    p.add_argument("--batch-size", type=int, default=8, help="images per training step")
    p.add_argument("--steps", type=int, default=3, help="timed steps (the median is reported)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--configurations", default=",".join(CONFIGURATIONS),
                   help="comma-separated subset of: %s" % ", ".join(CONFIGURATIONS))
    p.add_argument("--child", choices=CONFIGURATIONS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.data_shape = args.data_shape or zoo.get_config(args.network)["data_shape"]
    args.configurations = [c for c in args.configurations.split(",") if c]
    unknown = set(args.configurations) - set(CONFIGURATIONS)
    if unknown or "plain" not in args.configurations:
        p.error("--configurations must include plain and name only %s, got %s"
                % (", ".join(CONFIGURATIONS), ",".join(args.configurations)))
    return args


def random_batch(model, shapes, seed=0):
    """Uniform noise images and ``BOXES_PER_IMAGE`` random boxes per image, rows padded
    with -1 as the loader pads them."""
    rng = np.random.RandomState(seed)
    data = rng.uniform(-1, 1, shapes["data"]).astype(np.float32)
    label = np.full(shapes["label"], -1, np.float32)
    batch_size, num_classes = shapes["data"][0], model.config["num_classes"]
    corners = rng.uniform(0, 0.6, (batch_size, BOXES_PER_IMAGE, 2))
    sides = rng.uniform(0.1, 0.4, (batch_size, BOXES_PER_IMAGE, 2))
    label[:, :BOXES_PER_IMAGE, 0] = rng.randint(num_classes, size=(batch_size, BOXES_PER_IMAGE))
    label[:, :BOXES_PER_IMAGE, 1:3] = corners
    label[:, :BOXES_PER_IMAGE, 3:5] = corners + sides
    label[:, :BOXES_PER_IMAGE, 5:] = 0
    inputs = model.input_arrays(data)
    names = list(model.input_shapes())
    return mx.io.DataBatch(data=[mx.nd.array(inputs[n]) for n in names],
                           label=[mx.nd.array(label)])


def cpu_seconds():
    """User and system CPU time of this process, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(args, configuration):
    """Bind, train ``--warmup`` + ``--steps`` steps and return this process's figures."""
    mx.random.seed(0)
    np.random.seed(0)
    model = zoo.get_model(args.network, data_shape=args.data_shape)
    shapes = model.train_input_shapes(args.batch_size, LABEL_ROWS)
    symbol = model.train_symbol()
    if configuration == "memory-saving":
        symbol = memory_saving_symbol(symbol, shapes)
    planned_mb = MemoryPlanner(symbol, shapes).planned_mb(symbol)
    input_names = list(model.input_shapes())
    module = mx.mod.Module(symbol, data_names=input_names, label_names=["label"],
                           context=mx.cpu())
    module.bind(data_shapes=[(n, shapes[n]) for n in input_names],
                label_shapes=[("label", shapes["label"])], for_training=True)
    arg_params, aux_params = model.init_params(seed=0)
    module.init_params(arg_params=arg_params, aux_params=aux_params)
    module.init_optimizer(optimizer="sgd",
                          optimizer_params={"learning_rate": 1e-3, "momentum": 0.9})
    batch = random_batch(model, shapes)
    wall, cpu, first_loss = [], [], None
    for step in range(args.warmup + args.steps):
        start_wall, start_cpu = time.perf_counter(), cpu_seconds()
        module.forward_backward(batch)
        module.update()
        mx.nd.waitall()
        if step >= args.warmup:
            wall.append(time.perf_counter() - start_wall)
            cpu.append(cpu_seconds() - start_cpu)
        if first_loss is None:
            first_loss = sum(model.arch.training_losses(module.get_outputs()).values())
    return {"planned_mb": planned_mb,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "step_s": statistics.median(wall), "cpu_s": statistics.median(cpu),
            "loss": first_loss}


def run_child(args, configuration):
    """:func:`measure` in a fresh Python process: a process's peak memory is its own."""
    command = [sys.executable, os.path.abspath(__file__), "--network", args.network,
               "--data-shape", str(args.data_shape), "--batch-size", str(args.batch_size),
               "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--child", configuration]
    env = dict(os.environ, **CONFIGURATIONS[configuration])
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (configuration, done.stderr[-4000:]))
    return json.loads(done.stdout.splitlines()[-1])


def report(results):
    """The table and each configuration's ratios to plain."""
    print("%-14s %11s %13s %12s %11s %12s" % ("configuration", "planned MB", "peak RSS MB",
                                              "step s", "CPU s/step", "first loss"))
    for name, r in results.items():
        print("%-14s %11d %13.0f %12.2f %11.2f %12.5f" % (
            name, r["planned_mb"], r["peak_rss_mb"], r["step_s"], r["cpu_s"], r["loss"]))
    plain = results["plain"]
    for name, r in results.items():
        if name != "plain":
            print("%s / plain: peak RSS %.2fx, step time %.2fx, CPU time %.2fx" % (
                name, r["peak_rss_mb"] / plain["peak_rss_mb"], r["step_s"] / plain["step_s"],
                r["cpu_s"] / plain["cpu_s"]))


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure(args, args.child)))
        return 0
    print("%s, batch %d, data shape %d, median of %d steps after %d warm-up, each "
          "configuration in a fresh process, OMP_NUM_THREADS=%s" % (
              args.network, args.batch_size, args.data_shape, args.steps, args.warmup,
              os.environ.get("OMP_NUM_THREADS")), flush=True)
    report({name: run_child(args, name) for name in args.configurations})
    return 0


if __name__ == "__main__":
    sys.exit(main())
