"""``zoo quantize``: quantize an artifact to int8 (MKL-DNN), calibrated on the first batches
of a dataset split, or (``--dtype bf16``, on a CPU with native bfloat16) convert it to bf16,
which needs no data. The result is an artifact that eval, detect, demo and benchmark take
like any.

Example:
    zoo quantize --checkpoint output/train/ssd_mobilenetv2_stride8 \\
        --data-root output/shapes --calib-mode entropy
    zoo eval --checkpoint output/train/ssd_mobilenetv2_stride8-int8 --data-root output/shapes
    zoo quantize --checkpoint output/train/ssd_mobilenetv2_stride8 --dtype bf16
"""
from zoo.jobs.quantize import QuantizeOptions, quantize
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, QuantizeOptions, "checkpoint", "epoch", "dtype", "dataset", "data_root",
              "split", "annotations", "image_dir", "skip_bad", "data_threads", "calib_mode",
              "calib_batches", "batch_size", "class_map", "exclude", "output")


def run(args):
    result = quantize(QuantizeOptions.from_flags(args))
    precision = result.precision
    if precision["dtype"] == "bf16":
        print("%d layers in bf16 (%s); artifact written to %s"
              % (precision["bf16_layers"], precision["order"], result.prefix))
        return 0
    calibration = precision["calibration"]
    print("%d layers in int8 (%s calibration); artifact written to %s"
          % (calibration["int8_layers"], calibration["mode"], result.prefix))
    return 0
