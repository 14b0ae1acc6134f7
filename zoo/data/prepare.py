"""``tools/prepare_dataset.py``: pack a VOC or COCO dataset into MXNet .lst/.rec/.idx files."""
import argparse
import sys

from ..errors import DataError
from .coco import COCODataset
from .recordio import write_record_files
from .voc import VOCDataset

PROGRESS_EVERY = 500


def open_dataset(args):
    """The dataset the command line names."""
    if args.format == "voc":
        return VOCDataset(args.root, image_set=args.image_set, skip_bad=args.skip_bad)
    return COCODataset(args.annotations, args.image_dir, skip_bad=args.skip_bad)


def print_progress(done, total):
    """Report every ``PROGRESS_EVERY`` images and at the end."""
    if done % PROGRESS_EVERY == 0 or done == total:
        print("packed %d/%d images" % (done, total), flush=True)


def parse_args(argv):
    """The command line, with the options each format needs checked."""
    parser = argparse.ArgumentParser(
        prog="prepare_dataset.py",
        description="Write PREFIX.lst, PREFIX.rec, PREFIX.idx and PREFIX.classes.txt "
                    "(im2rec detection format, boxes normalised to [0, 1]) from a dataset.")
    parser.add_argument("--format", choices=("voc", "coco"), required=True)
    parser.add_argument("--root", help="VOC: the folder holding Annotations/ and JPEGImages/")
    parser.add_argument("--image-set", default="trainval",
                        help="VOC: a list in ImageSets/Main (default: trainval)")
    parser.add_argument("--annotations", help="COCO: the annotation JSON file")
    parser.add_argument("--image-dir", help="COCO: the folder holding the images")
    parser.add_argument("--output", required=True, metavar="PREFIX",
                        help="output path without extension")
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip bad records with one warning instead of stopping")
    args = parser.parse_args(argv)
    needed = ("root",) if args.format == "voc" else ("annotations", "image_dir")
    for name in needed:
        if getattr(args, name) is None:
            parser.error("--format %s needs --%s" % (args.format, name.replace("_", "-")))
    return args


def main(argv=None):
    """Run the tool; returns the exit code (1 on a data error, with a one-line message)."""
    args = parse_args(argv)
    try:
        dataset = open_dataset(args)
        print("%s: %d images, %d classes" % (args.format, len(dataset), len(dataset.class_names)),
              flush=True)
        images, objects = write_record_files(dataset, args.output, progress=print_progress)
    except DataError as err:
        print("error: %s" % err, file=sys.stderr)
        return 1
    print("wrote %d images, %d objects to %s.rec (.lst, .idx, .classes.txt beside it)"
          % (images, objects, args.output))
    return 0
