"""``zoo benchmark-calibration``: seconds per image of int8 calibration with MXNet's
collector and with the zoo's, side by side on random images (see
:mod:`zoo_bench.calibration`).

Example:
    zoo benchmark-calibration --network faster_rcnn_resnet50 --data-shape 320 \\
        --max-size 512 --images 2
"""
from zoo_bench.options import CalibrationBenchmarkOptions
from zoo.choices import CALIB_MODES, COLLECTORS
from zoo.config.registry import list_models
from zoo.cli.common import (add_batch_flag, add_input_size_flags, comma_list, options_from,
                            positive_int)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("--network", default=CalibrationBenchmarkOptions.network, choices=list_models(),
                   metavar="NAME", help="registered model: %s" % ", ".join(list_models()))
    add_input_size_flags(p, CalibrationBenchmarkOptions, max_size=True)
    p.add_argument("--images", type=positive_int, default=CalibrationBenchmarkOptions.images,
                   help="random calibration images")
    add_batch_flag(p, CalibrationBenchmarkOptions.batch_size)
    p.add_argument("--calib-mode", choices=CALIB_MODES,
                   default=CalibrationBenchmarkOptions.calib_mode,
                   help="naive: observed min/max; entropy: KL-optimal thresholds")
    p.add_argument("--collectors", type=comma_list(str),
                   default=",".join(CalibrationBenchmarkOptions.collectors),
                   help="comma-separated, of: %s" % ", ".join(COLLECTORS))


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.calibration import benchmark_calibration
    benchmark_calibration(options_from(CalibrationBenchmarkOptions, args))
    return 0
