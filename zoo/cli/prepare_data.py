"""``zoo prepare-data``: pack a VOC or COCO dataset into MXNet PREFIX.lst, PREFIX.rec,
PREFIX.idx and PREFIX.classes.txt (im2rec detection format, boxes normalised to [0, 1]).

Example:
    zoo prepare-data --format voc --root VOCdevkit/VOC2007 --split trainval --output rec/train
"""
from zoo.jobs.prepare_data import PrepareOptions, prepare_data
from zoo.cli.common import add_hidden_alias
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]

PROGRESS_EVERY = 500


def add_arguments(p):
    add_flags(p, PrepareOptions, "format", "root", "split")
    add_hidden_alias(p, "--image-set", "split")
    add_flags(p, PrepareOptions, "annotations", "image_dir", "output", "skip_bad")


def print_progress(done, total):
    if done % PROGRESS_EVERY == 0 or done == total:
        print("packed %d/%d images" % (done, total), flush=True)


def run(args):
    result = prepare_data(PrepareOptions.from_flags(args), progress=print_progress)
    print("wrote %d images, %d objects of %d classes to %s.rec (.lst, .idx, .classes.txt "
          "beside it)" % (result.images, result.objects, result.classes, args.output))
    return 0
