"""``zoo plot-log``: plot the loss and validation mAP curves of a per-epoch training CSV log
into a PNG, with the warnings of the run's health record (``<prefix>-health.json`` beside
``<prefix>-log.csv``) marked in their epochs, and print the PNG's path.

Example:
    zoo plot-log output/train/ssd_mobilenetv2_stride8-log.csv
"""
import os

from zoo.flags import add_flags
from zoo.inference.visualize import log_health_warnings, plot_training_log
from zoo.jobs.plot_log import PlotLogOptions

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("csv", help="per-epoch training log (columns epoch, *_loss, val_map, ...)")
    add_flags(p, PlotLogOptions, "output")


def run(args):
    options = PlotLogOptions.from_flags(args)
    output = options.output or os.path.splitext(options.csv)[0] + ".png"
    plot_training_log(options.csv, output)
    print(output)
    health, warnings = log_health_warnings(options.csv)
    if warnings:
        print("%d health warning%s of %s marked" % (len(warnings), "" if len(warnings) == 1
                                                      else "s", health))
    return 0
