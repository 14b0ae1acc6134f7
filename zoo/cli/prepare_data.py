"""``zoo prepare-data``: pack a VOC or COCO dataset into MXNet PREFIX.lst, PREFIX.rec,
PREFIX.idx and PREFIX.classes.txt (im2rec detection format, boxes normalised to [0, 1]).

Example:
    zoo prepare-data --format voc --root VOCdevkit/VOC2007 --split trainval --output rec/train
"""
from zoo.jobs.prepare_data import FORMATS, PrepareOptions, prepare_data
from zoo.cli.common import add_hidden_alias, options_from

__all__ = ["add_arguments", "run"]

PROGRESS_EVERY = 500


def add_arguments(p):
    p.add_argument("--format", choices=FORMATS, required=True, help="dataset format")
    p.add_argument("--root", default=PrepareOptions.root,
                   help="voc: the folder holding Annotations/ and JPEGImages/")
    p.add_argument("--split", default=PrepareOptions.split,
                   help="voc: an image set of ImageSets/Main")
    add_hidden_alias(p, "--image-set", "split")
    p.add_argument("--annotations", default=PrepareOptions.annotations,
                   help="coco: the annotation JSON file")
    p.add_argument("--image-dir", default=PrepareOptions.image_dir,
                   help="coco: the folder holding the images")
    p.add_argument("--output", required=True, metavar="PREFIX",
                   help="output path without extension")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip bad records with one warning instead of stopping")


def print_progress(done, total):
    if done % PROGRESS_EVERY == 0 or done == total:
        print("packed %d/%d images" % (done, total), flush=True)


def run(args):
    result = prepare_data(options_from(PrepareOptions, args), progress=print_progress)
    print("wrote %d images, %d objects of %d classes to %s.rec (.lst, .idx, .classes.txt "
          "beside it)" % (result.images, result.objects, result.classes, args.output))
    return 0
