"""``zoo plot-log``: plot the loss and validation mAP curves of a per-epoch training CSV log
into a PNG, and print the PNG's path.

Example:
    zoo plot-log output/train/ssd_mobilenetv2_stride8-log.csv
"""
import os

from zoo.inference.visualize import plot_training_log

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("csv", help="per-epoch training log (columns epoch, *_loss, val_map, ...)")
    p.add_argument("--output", default=None,
                   help="PNG to write (default: the CSV's path with .png)")


def run(args):
    output = args.output or os.path.splitext(args.csv)[0] + ".png"
    plot_training_log(args.csv, output)
    print(output)
    return 0
