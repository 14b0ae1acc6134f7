#!/usr/bin/env python
"""Quantize a trained checkpoint to int8 (MKL-DNN), calibrated on a few batches of a dataset.

Writes a deployable checkpoint (int8 graph, parameters, metadata) that
tools/eval.py, tools/demo.py and tools/benchmark.py take like any other.

Example:
    python tools/quantize.py --checkpoint output/train/ssd_mobilenetv2_stride8 \\
        --dataset voc --data-root output/shapes --calib-mode entropy
    python tools/eval.py --checkpoint output/train/ssd_mobilenetv2_stride8-int8 \\
        --dataset voc --data-root output/shapes
"""
import argparse
import logging
import os
import sys
import time

from zoo import checkpoint
from zoo.data.factory import KINDS, open_dataset
from zoo.errors import ConfigError, DataError
from zoo.quantization import CALIB_MODES, calibration_iter, int8_layers, quantize


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="fp32 checkpoint prefix")
    p.add_argument("--epoch", type=int, default=None, help="default: the newest complete one")
    p.add_argument("--dataset", choices=KINDS, default="embedded")
    p.add_argument("--data-root", default=os.path.join("output", "shapes"))
    p.add_argument("--split", default="train",
                   help="split whose first images calibrate (not the one you evaluate on)")
    p.add_argument("--calib-mode", choices=CALIB_MODES, default="naive",
                   help="naive: observed min/max; entropy: KL-optimal thresholds")
    p.add_argument("--calib-batches", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--exclude", default="",
                   help="comma-separated layer names to keep in fp32 besides the defaults")
    p.add_argument("--output", default=None, help="output prefix (default: <checkpoint>-int8)")
    p.add_argument("--data-threads", type=int, default=None)
    p.add_argument("--skip-bad", action="store_true")
    args = p.parse_args(argv)
    if args.calib_batches < 1 or args.batch_size < 1:
        p.error("--calib-batches and --batch-size must be at least 1")
    return args


def run(args):
    """Quantize and save; returns ``(output prefix, number of int8 layers)``."""
    model, arg_params, aux_params, meta = checkpoint.load_model(args.checkpoint, args.epoch)
    if meta.get("quantization"):
        raise ConfigError(args.checkpoint, "quantization", meta["quantization"],
                          "an fp32 checkpoint (this one is already int8)")
    dataset = open_dataset(args.dataset, args.data_root, args.split, args.skip_bad)
    calib_data = calibration_iter(model, dataset, args.batch_size, args.calib_batches,
                                  args.data_threads)
    excluded = [name for name in args.exclude.split(",") if name]
    start = time.time()
    symbol, q_arg_params, q_aux_params = quantize(
        checkpoint.load_symbol(args.checkpoint), arg_params, aux_params, calib_data,
        args.calib_mode, excluded)
    layers = int8_layers(symbol)
    output = args.output or args.checkpoint + "-int8"
    info = {"calib_mode": args.calib_mode, "calib_images": args.calib_batches * args.batch_size,
            "calib_data": "%s:%s/%s" % (args.dataset, args.data_root, args.split),
            "excluded": excluded, "int8_layers": len(layers), "source": args.checkpoint,
            "seconds": round(time.time() - start, 1)}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    checkpoint.save(output, meta["epoch"], symbol, q_arg_params, q_aux_params, None,
                    dict(meta, quantization=info))
    return output, len(layers)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        output, num_layers = run(args)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as err:
        print("quantize.py: error: %s" % err, file=sys.stderr)
        return 1
    print("%d layers in int8 (%s calibration); checkpoint written to %s"
          % (num_layers, args.calib_mode, output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
