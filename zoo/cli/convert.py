"""``zoo convert``: rewrite a format-1 checkpoint as a format-2 artifact. Run it where the
checkpoint was trained: format 1 named its model (a registered name or a YAML path) instead
of storing its config. Its pickled optimizer state is never read.

Example:
    zoo convert --checkpoint output/train/ssd_mobilenetv2
"""
from zoo.jobs.convert import ConvertOptions, convert_v1
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, ConvertOptions, "checkpoint", "epoch", "output")


def run(args):
    options = ConvertOptions.from_flags(args)
    print(convert_v1(options.checkpoint, options.epoch, options.output))
    return 0
