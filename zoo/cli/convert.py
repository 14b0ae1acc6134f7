"""``zoo convert``: rewrite a format-1 checkpoint as a format-2 artifact. Run it where the
checkpoint was trained: format 1 named its model (a registered name or a YAML path) instead
of storing its config. Its pickled optimizer state is never read.

Example:
    zoo convert --checkpoint output/train/ssd_mobilenetv2
"""
from zoo.cli.common import add_checkpoint_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_checkpoint_flags(p, "format-1 checkpoint prefix", epoch_help="every format-1 epoch")
    p.add_argument("--output", default=None, metavar="PREFIX",
                   help="prefix of the artifact (default: the checkpoint's, in place)")


def run(args):
    # Imported here: converting loads MXNet, which the parser does without.
    from zoo.jobs.convert import convert_v1
    print(convert_v1(args.checkpoint, args.epoch, args.output))
    return 0
