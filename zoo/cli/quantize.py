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
from zoo.choices import CALIB_MODES
from zoo.jobs.quantize import DTYPES, QuantizeOptions, quantize
from zoo.cli.common import (add_batch_flag, add_checkpoint_flags, add_class_map_flag,
                     add_dataset_flags, comma_list, options_from, positive_int)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_checkpoint_flags(p, "fp32 artifact prefix", QuantizeOptions.epoch)
    p.add_argument("--dtype", choices=DTYPES, default=QuantizeOptions.dtype,
                   help="int8: calibrated on a dataset split (the flags below); bf16: "
                        "converted, no data and no calibration flags (a CPU with "
                        "avx512_bf16 or amx_bf16)")
    add_dataset_flags(p, QuantizeOptions, {"--split": "split whose first images calibrate (not "
                                                     "the one you evaluate on)"}, named=True)
    p.add_argument("--calib-mode", choices=CALIB_MODES, default=QuantizeOptions.calib_mode,
                   help="naive: observed min/max; entropy: KL-optimal thresholds")
    p.add_argument("--calib-batches", type=positive_int, default=QuantizeOptions.calib_batches,
                   help="batches of the split that calibrate")
    add_batch_flag(p, QuantizeOptions.batch_size)
    add_class_map_flag(p, QuantizeOptions.class_map)
    p.add_argument("--exclude", type=comma_list(str), default=QuantizeOptions.exclude,
                   help="comma-separated layer names to keep in fp32 besides the defaults")
    p.add_argument("--output", default=QuantizeOptions.output,
                   help="output prefix (default: <checkpoint>-int8, or -bf16)")


def run(args):
    result = quantize(options_from(QuantizeOptions, args))
    precision = result.precision
    if precision["dtype"] == "bf16":
        print("%d layers in bf16 (%s); artifact written to %s"
              % (precision["bf16_layers"], precision["order"], result.prefix))
        return 0
    calibration = precision["calibration"]
    print("%d layers in int8 (%s calibration); artifact written to %s"
          % (calibration["int8_layers"], calibration["mode"], result.prefix))
    return 0
