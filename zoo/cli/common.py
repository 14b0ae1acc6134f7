"""Flags shared by several commands, each declared once under one name; a command's own
options declare theirs on their fields (:mod:`zoo.flags`, which also holds the argparse types
that check values while the command line is parsed)."""
import argparse
import dataclasses
import os

from zoo.data.factory import KINDS
from zoo.data.orientation import EXIF_CHOICES
# The value types and options_from live beside the options' flags (zoo.flags); the commands
# take them from here with the rest.
from zoo.flags import (comma_list, ctx, float_in, fraction, increasing, network,
                       nonnegative_float, nonnegative_int, options_from, positive_float,
                       positive_int)

__all__ = ["HelpFormatter", "KINDS", "Parser", "add_batch_flag", "add_checkpoint_flags",
           "add_class_map_flag", "add_ctx_flag", "add_data_threads_flag", "add_dataset_flags",
           "add_exif_flag", "add_hidden_alias", "add_progress_flag", "comma_list", "ctx",
           "existing_folder", "field_default", "float_in", "fraction", "increasing", "network",
           "nonnegative_float", "nonnegative_int", "options_from", "positive_float",
           "positive_int"]


class Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one line, ``zoo COMMAND: error: ...`` naming the
    flag (``--help`` shows the usage), exit status 2."""

    def error(self, message):
        self.exit(2, "%s: error: %s\n" % (self.prog, " ".join(message.split())))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter,
                    argparse.RawDescriptionHelpFormatter):
    """Keeps the description's examples as written and shows each flag's true default,
    except where there is none to show (None, empty, or an on/off switch) and the help text
    says what happens instead."""

    def _get_help_string(self, action):
        if action.default in (None, "", (), []) or isinstance(action.const, bool):
            return action.help
        return super()._get_help_string(action)


def existing_folder(value):
    """A folder that exists."""
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError("must be an existing folder, got %r (%s)" % (
            value, "a file" if os.path.exists(value) else "no such folder"))
    return value


def add_checkpoint_flags(parser, what, epoch=None,
                         epoch_help="the best validated one, else the newest"):
    """``--checkpoint`` and ``--epoch`` (default ``epoch``, the command's options' field;
    ``epoch_help`` says what it means)."""
    parser.add_argument("--checkpoint", required=True, metavar="PREFIX", help=what)
    parser.add_argument("--epoch", type=nonnegative_int, default=epoch,
                        help="epoch to load (default: %s)" % epoch_help)


def add_dataset_flags(parser, options, splits, named=False):
    """``--dataset``, ``--data-root``, one flag per entry of ``splits`` (flag -> help),
    ``--annotations``, ``--image-dir``, ``--skip-bad`` and ``--data-threads``, their
    defaults the fields of the same names of ``options`` (the command's options dataclass).
    ``named``: a command reading a dataset the user names (not training, which may generate
    the embedded one): ``--data-root`` must be an existing folder, needed unless a COCO split
    names its --annotations and --image-dir (:func:`zoo.data.factory.needs_root`)."""
    parser.add_argument("--dataset", choices=KINDS, default=options.dataset,
                        help="dataset format ('embedded' generates the shapes dataset into "
                             "--data-root first)")
    if named:
        parser.add_argument("--data-root", type=existing_folder, default=options.data_root,
                            help="dataset folder (needed unless --dataset coco names its "
                                 "--annotations and --image-dir)")
    else:
        parser.add_argument("--data-root", default=options.data_root, help="dataset folder")
    for flag, text in splits.items():
        parser.add_argument(flag, default=getattr(options, flag[2:].replace("-", "_")),
                            help=text)
    add_coco_file_flags(parser, options)
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip bad annotations/images with a warning instead of stopping")
    add_data_threads_flag(parser, options.data_threads)


def add_coco_file_flags(parser, options, when="coco"):
    """``--annotations`` and ``--image-dir``: a COCO split's own file and image folder
    (defaults: ``options``' fields); ``when`` opens their help (the condition they apply
    under)."""
    parser.add_argument("--annotations", default=options.annotations, metavar="FILE",
                        help="%s: the annotation file, '{split}' standing for the split "
                             "(default: DATA_ROOT/annotations/instances_{split}.json)" % when)
    parser.add_argument("--image-dir", default=options.image_dir, metavar="DIR",
                        help="%s: the folder its file_name entries are under, '{split}' "
                             "standing for the split (default: DATA_ROOT/{split})" % when)


def class_pair(value):
    """``DATASET_CLASS=ARTIFACT_CLASS``."""
    dataset_class, equals, artifact_class = value.partition("=")
    if not (equals and dataset_class.strip() and artifact_class.strip()):
        raise argparse.ArgumentTypeError("must be comma-separated DATASET_CLASS=ARTIFACT_CLASS "
                                         "pairs, got %r" % value)
    return dataset_class.strip(), artifact_class.strip()


def add_class_map_flag(parser, default):
    parser.add_argument(
        "--class-map", type=comma_list(class_pair), default=default, metavar="DATA=ARTIFACT,...",
        help="score a dataset of some of the artifact's classes, or renamed ones: each dataset "
             "class is the artifact class of the same name unless mapped here, e.g. "
             "'car=automobile' ('' for names only); detections of the artifact's other classes "
             "are dropped (default: the dataset's classes must be the artifact's, in order)")


def add_data_threads_flag(parser, default):
    parser.add_argument("--data-threads", type=positive_int, default=default,
                        help="threads decoding and transforming images (default: all cores "
                             "to train; half of them, at most 4, beside inference)")


def add_input_size_flags(parser, options, max_size=False, of_network=False,
                         of_checkpoint=False):
    """``--data-shape`` and, with ``max_size``, ``--max-size`` (a Faster R-CNN's): a model's
    input size, their defaults the fields of the same names of ``options``. ``of_network``:
    they size the ``--network`` a command builds; ``of_checkpoint``: the size a
    ``--checkpoint`` runs at (its own, its training size, by default)."""
    owners = [text for text, given in (("the config's", not of_checkpoint or of_network),
                                       ("the checkpoint's", of_checkpoint)) if given]

    def default(value):
        return " or ".join(owners) if value is None else "%(default)s"
    side = {(True, False): "input side of --network", (False, True): "input side to run at",
            (True, True): "input side (--network: built at; --checkpoint: run at, recorded in "
                          "the export)"}.get((of_network, of_checkpoint), "input side")
    parser.add_argument("--data-shape", type=positive_int, default=options.data_shape,
                        help="%s%s (default: %s)" % (
                            side, ", a Faster R-CNN's short side" if max_size else "",
                            default(options.data_shape)))
    if max_size:
        parser.add_argument("--max-size", type=positive_int, default=options.max_size,
                            help="a Faster R-CNN's long-side limit (default: %s)"
                                 % default(options.max_size))


def add_batch_flag(parser, default):
    parser.add_argument("--batch-size", type=positive_int, default=default,
                        help="images per batch")


def add_ctx_flag(parser, default):
    parser.add_argument("--ctx", type=ctx, default=default, help="'cpu' or 'gpu0,1,...'")


def add_exif_flag(parser, default):
    parser.add_argument("--exif", choices=EXIF_CHOICES, default=default,
                        help="'apply': turn a photo as its EXIF orientation says, boxes in the "
                             "frame a viewer shows; 'ignore': the stored pixels")


def add_progress_flag(parser):
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar (log lines only)")


def add_hidden_alias(parser, flag, dest, type=None):
    """An old flag name kept working for ``dest`` without showing in --help."""
    parser.add_argument(flag, dest=dest, type=type, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def field_default(options_class, name):
    """The default of field ``name`` of ``options_class``; a ``default_factory``'s value is
    made now (a flag's default is fixed when its parser is built)."""
    field = options_class.__dataclass_fields__[name]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default
