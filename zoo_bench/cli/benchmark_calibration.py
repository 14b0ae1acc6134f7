"""``zoo benchmark-calibration``: seconds per image of int8 calibration with MXNet's
collector and with the zoo's, side by side on random images (see
:mod:`zoo_bench.calibration`).

Example:
    zoo benchmark-calibration --network faster_rcnn_resnet50 --data-shape 320 \\
        --max-size 512 --images 2
"""
from zoo_bench.options import CalibrationBenchmarkOptions
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, CalibrationBenchmarkOptions, "network", "data_shape", "max_size", "images",
              "batch_size", "calib_mode", "collectors")


def run(args):
    # Imported here: the benchmark loads MXNet, which the parser (--help) does without.
    from zoo_bench.calibration import benchmark_calibration
    benchmark_calibration(CalibrationBenchmarkOptions.from_flags(args))
    return 0
