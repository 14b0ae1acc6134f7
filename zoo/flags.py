"""Options that are also command-line flags, each declared once: on the field of the options
dataclass that holds it (:func:`flag`: its default, help text, flag name, type, choices), from
which a command's parser takes the flag (:func:`add_flags`) and its run builds the options
back (:func:`options_from`, through the options class's own ``from_flags``: a call that names
the class it builds lets a reader, and ``farm-studio walk``, follow a flag from the parsed
arguments to the options and on to where the job reads it). An option several commands share
has one field maker here (:func:`batch_size_flag`, :func:`data_shape_flag`, ...) that each
options class holding it calls. Here too the argparse types that check a flag's value while
the command line is parsed (a bad value is a usage error naming its flag, before any model
or dataset is opened).

Nothing here loads MXNet: the parsers (``--help``) build from these alone."""
import argparse
import dataclasses
import math
import os

from zoo.process import gpu_ids

__all__ = ["ARTIFACT_OR_DEPLOYED", "BEST_EPOCH", "FLAG", "REQUIRED", "add_flag", "add_flags",
           "annotations_flag", "batch_size_flag", "checkpoint_flag", "class_map_flag",
           "class_pair", "comma_list", "ctx", "data_root_flag", "data_shape_flag",
           "data_threads_flag", "dataset_flag", "epoch_flag", "exif_flag", "existing_folder",
           "field_default", "field_of", "flag", "flag_name", "float_in", "fraction",
           "image_dir_flag", "increasing", "inference_batch_flag", "max_size_flag", "network",
           "nonnegative_float", "nonnegative_int", "options_from", "positive_float",
           "positive_int", "progress_flag", "skip_bad_flag"]

FLAG = "flag"
"""The key of a field's metadata that holds its flag (:func:`flag`)."""


REQUIRED = dataclasses.MISSING
"""The default of a field without one: its flag must be given."""


def flag(default, help, name=None, default_factory=dataclasses.MISSING, **argparse_keywords):
    """A dataclass field of ``default`` (:data:`REQUIRED`: none, the flag must be given)
    that is also the flag ``name`` (default :func:`flag_name`; a tuple for short forms too,
    ``("-n", "--num-workers")``), shown with ``help``; ``argparse_keywords`` (``type``,
    ``choices``, ``metavar``, ``nargs``, ``const``, ``action``) go to ``add_argument`` as
    written. A bool field is an on/off switch: ``--NAME`` turns on a field that defaults to
    False, ``--no-NAME`` turns off one that defaults to True. ``default_factory`` (with
    ``default`` :data:`REQUIRED`) makes the default when the options, or the parser, are
    made."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={
        FLAG: dict(argparse_keywords, help=help, name=name)})


def flag_name(field):
    """``--data-shape`` for field ``data_shape``; ``--no-crop`` for a bool ``crop`` that
    defaults to True."""
    name = "--" + field.name.replace("_", "-")
    return "--no-" + name[2:] if field.default is True else name


def add_flags(parser, options_class, *names, defaults=None):
    """Add the flags that fields ``names`` of ``options_class`` declare (:func:`flag`) to
    ``parser``, in that order (the order ``--help`` lists them in); their defaults are the
    class's (those of ``defaults``, another options class with these fields, if given)."""
    fields = {field.name: field for field in dataclasses.fields(options_class)}
    for name in names:
        add_flag(parser, fields[name], field_default(defaults or options_class, name))


def field_default(options_class, name):
    """The default of field ``name`` of ``options_class`` (:data:`REQUIRED` for none); a
    ``default_factory``'s value is made now (a flag's default is fixed when its parser is
    built)."""
    field = options_class.__dataclass_fields__[name]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return getattr(options_class, name, REQUIRED)  # the class's, as it stands now


def field_of(options_class, name):
    """A field like field ``name`` of ``options_class``: its default and its flag, for
    another options class that holds the same option (declared once, on ``options_class``)."""
    field = options_class.__dataclass_fields__[name]
    return dataclasses.field(default=field.default, default_factory=field.default_factory,
                             metadata=field.metadata)


def options_from(options_class, args, **values):
    """``options_class`` (an options dataclass) from the parsed flags ``args``: every field
    from the flag of the same name (its ``dest``), except those given in ``values``."""
    return options_class(**values, **{field.name: getattr(args, field.name)
                                      for field in dataclasses.fields(options_class)
                                      if field.name not in values})


def add_flag(parser, field, default):
    """Add the flag ``field`` declares (:func:`flag`) to ``parser``, its default ``default``
    (the field's, read from its class when the parser is built)."""
    keywords = dict(field.metadata[FLAG])
    names = keywords.pop("name") or flag_name(field)
    if isinstance(field.default, bool):
        # A switch turns its field's own default the other way.
        keywords["action"] = "store_false" if field.default else "store_true"
        default = field.default
    if keywords.get("action") == "append":
        default = list(default)  # argparse appends to a copy of its default
    text = getattr(keywords.get("type"), "text", None)
    if text and isinstance(default, tuple) and default:
        # Shown as it is typed; argparse parses a default given as text with the flag's type.
        default = text(default)
    if default is REQUIRED:
        keywords["required"] = True
    else:
        keywords["default"] = default
    names = (names,) if isinstance(names, str) else names
    return parser.add_argument(*names, dest=field.name, **keywords)


def _number(parse, value, kind):
    try:
        return parse(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be %s, got %r" % (kind, value)) from None


def positive_int(value):
    """A count: an integer >= 1."""
    number = _number(int, value, "an integer >= 1")
    if number < 1:
        raise argparse.ArgumentTypeError("must be an integer >= 1, got %r" % value)
    return number


def nonnegative_int(value):
    number = _number(int, value, "an integer >= 0")
    if number < 0:
        raise argparse.ArgumentTypeError("must be an integer >= 0, got %r" % value)
    return number


def float_in(low=-math.inf, high=math.inf, low_open=False, high_open=False):
    """A type accepting finite floats from ``low`` to ``high`` (each end included unless
    ``low_open``/``high_open``)."""
    bounds = [("%s %g" % (">" if low_open else ">=", low)) if low > -math.inf else "",
              ("%s %g" % ("<" if high_open else "<=", high)) if high < math.inf else ""]
    kind = " ".join(["a finite number"] + [b for b in bounds if b])
    if all(bounds):
        kind = "a finite number %s and %s" % tuple(bounds)

    def parse(value):
        number = _number(float, value, kind)
        if (not math.isfinite(number) or number < low or number > high
                or (low_open and number == low) or (high_open and number == high)):
            raise argparse.ArgumentTypeError("must be %s, got %r" % (kind, value))
        return number
    parse.__name__ = kind
    return parse


positive_float = float_in(0.0, low_open=True)
nonnegative_float = float_in(0.0)
fraction = float_in(0.0, 1.0)


def comma_list(item_type):
    """A type parsing ``"a,b,c"`` into a tuple of ``item_type`` values; ``""`` is ``()``."""
    def parse(value):
        return tuple(item_type(item.strip()) for item in value.split(",") if item.strip())
    parse.__name__ = "comma-separated list"
    parse.text = lambda items: ",".join(map(str, items))  # a default as --help shows it
    return parse


def increasing(list_type):
    """A type parsing a list with ``list_type`` whose entries must strictly increase."""
    def parse(value):
        items = list_type(value)
        if any(b <= a for a, b in zip(items, items[1:])):
            raise argparse.ArgumentTypeError("must strictly increase, got %r" % value)
        return items
    parse.__name__ = getattr(list_type, "__name__", "list")
    return parse


def ctx(value):
    """``cpu`` or ``gpuN[,M...]`` naming GPUs this MXNet sees."""
    try:
        ids = gpu_ids(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if not ids:
        return value
    import mxnet as mx  # only to count the GPUs named: cpu (and --help) goes without
    available = mx.context.num_gpus()
    missing = [i for i in ids if i >= available]
    if missing:
        seen = ("sees no GPU (a CPU-only build, or no driver)" if not available else
                "sees %d GPU%s (gpu0 to gpu%d)" % (available, "s" if available > 1 else "",
                                                    available - 1))
        raise argparse.ArgumentTypeError("must name GPUs this machine has, got %r: MXNet %s"
                                         % (value, seen))
    return value


def network(value):
    """A registered model name or the path of a YAML config."""
    from zoo.config.registry import is_network, list_models  # read when a flag names one
    if is_network(value):
        return value
    raise argparse.ArgumentTypeError("must be a registered model (%s) or a YAML file, got %r"
                                     % (", ".join(list_models()), value))


# Options several commands share, each declared here once: a field maker per option, called
# in the class body of every options class that has it (``batch_size: int =
# batch_size_flag(8)``), with that class's default where classes differ. Its help, type and
# choices are written here alone.

BEST_EPOCH = "the best validated one, else the newest"

ARTIFACT_OR_DEPLOYED = ("artifact prefix (fp32, or int8 or bf16 from `zoo quantize`), or a "
                        "PREFIX.onnx or PREFIX.xml (OpenVINO) file from `zoo export`")
"""What ``--checkpoint`` names to the commands that run any artifact or deployed file."""


def checkpoint_flag(help):
    """``--checkpoint PREFIX``, which must be given; ``help`` says what it may name."""
    return flag(REQUIRED, help, metavar="PREFIX")


def epoch_flag(meaning=BEST_EPOCH):
    """``--epoch``: None loads ``meaning``."""
    return flag(None, "epoch to load (default: %s)" % meaning, type=nonnegative_int)


def dataset_flag(default):
    from zoo.data.factory import KINDS  # a dataset's formats: no MXNet either
    return flag(default, "dataset format ('embedded' generates the shapes dataset into "
                         "--data-root first)", choices=KINDS)


def data_root_flag(default, named=False):
    """``--data-root``; ``named``: of a command reading a dataset the user names (not
    training, which may generate the embedded one): an existing folder, needed unless a COCO
    split names its --annotations and --image-dir (:func:`zoo.data.factory.needs_root`)."""
    if not named:
        return flag(default, "dataset folder")
    return flag(default, "dataset folder (needed unless --dataset coco names its "
                         "--annotations and --image-dir)", type=existing_folder)


def annotations_flag(when="coco"):
    """``--annotations``: a COCO split's own file; ``when`` opens its help (the condition
    it applies under)."""
    return flag(None, "%s: the annotation file, '{split}' standing for the split (default: "
                      "DATA_ROOT/annotations/instances_{split}.json)" % when, metavar="FILE")


def image_dir_flag(when="coco"):
    """``--image-dir``: a COCO split's own image folder (``when``: as :func:`annotations_flag`)."""
    return flag(None, "%s: the folder its file_name entries are under, '{split}' standing for "
                      "the split (default: DATA_ROOT/{split})" % when, metavar="DIR")


def skip_bad_flag():
    return flag(False, "skip bad annotations/images with a warning instead of stopping")


def data_threads_flag(default=None):
    """``--data-threads``: None lets the job choose (all cores to train, at most 4 beside
    inference)."""
    return flag(default, "threads decoding and transforming images (default: all cores to "
                         "train; half of them, at most 4, beside inference)", type=positive_int)


def batch_size_flag(default):
    return flag(default, "images per batch", type=positive_int)


def inference_batch_flag():
    """``--batch-size`` of a command running a detector: None batches as many images as fill
    about a megapixel of the network's input (:func:`zoo.inference.runner.default_batch_size`)."""
    return flag(None, "images per batch (default: as many as fill about a megapixel of the "
                      "network's input, at most 8: 8 for a small SSD, 4 at 512, 1 for a Faster "
                      "R-CNN at 600x1000)", type=positive_int)


def _size_default(value, of_network, of_checkpoint):
    """What an input size of None means: the config's, the checkpoint's, or either."""
    owners = [text for text, given in (("the config's", not of_checkpoint or of_network),
                                       ("the checkpoint's", of_checkpoint)) if given]
    return " or ".join(owners) if value is None else "%(default)s"


def data_shape_flag(default=None, max_size=False, of_network=False, of_checkpoint=False):
    """``--data-shape``: a model's input side (with ``max_size``, a Faster R-CNN's short side:
    the class has :func:`max_size_flag` too). ``of_network``: it sizes the ``--network`` a
    command builds; ``of_checkpoint``: the size a ``--checkpoint`` runs at (its own, its
    training size, by default)."""
    side = {(True, False): "input side of --network", (False, True): "input side to run at",
            (True, True): "input side (--network: built at; --checkpoint: run at, recorded in "
                          "the export)"}.get((of_network, of_checkpoint), "input side")
    return flag(default, "%s%s (default: %s)" % (
        side, ", a Faster R-CNN's short side" if max_size else "",
        _size_default(default, of_network, of_checkpoint)), type=positive_int)


def max_size_flag(default=None, of_network=False, of_checkpoint=False):
    """``--max-size``: a Faster R-CNN's long-side limit (beside :func:`data_shape_flag`)."""
    return flag(default, "a Faster R-CNN's long-side limit (default: %s)"
                % _size_default(default, of_network, of_checkpoint), type=positive_int)


def tiles_flag(training=False):
    """``--tiles SIZE``: a run's tile side in pixels (:mod:`zoo.inference.tiles`). Training
    cuts its photos into such tiles; a command running a checkpoint runs them beside the whole
    photo, by default those the checkpoint was trained on (0: none)."""
    from zoo.data.tiles import MIN_TILE  # no MXNet
    if training:
        return flag(None, "train on overlapping square tiles of SIZE pixels of each photo, cut "
                          "as it loads (boxes clipped to each tile), and validate whole photos "
                          "run whole and in these tiles as zoo detect --tiles runs them; "
                          "recorded in the artifact, which zoo detect and zoo eval then run in "
                          "tiles (e.g. 320; at least %d)" % MIN_TILE,
                    type=positive_int, metavar="SIZE")
    return flag(None, "also detect in overlapping square tiles of SIZE pixels of the photo, each "
                      "resized to the network's input, for objects too small for the whole "
                      "photo's pass (which is kept); boxes are merged (e.g. 800; at least %d; "
                      "default: the tiles the checkpoint was trained on, if any; 0: none)"
                % MIN_TILE, type=nonnegative_int, metavar="SIZE")


def tile_overlap_flag(of_checkpoint=False):
    """``--tile-overlap SHARE``: the share of a tile's side its neighbours overlap."""
    from zoo.data.tiles import DEFAULT_OVERLAP  # no MXNet
    return flag(None, "share of a tile's side its neighbours overlap (default %s)" % (
        "the checkpoint's tiles', else %g" % DEFAULT_OVERLAP if of_checkpoint
        else "%g" % DEFAULT_OVERLAP), type=float_in(0.0, 1.0, high_open=True), metavar="SHARE")


def exif_flag():
    from zoo.data.orientation import EXIF_CHOICES  # no MXNet either
    return flag("apply", "'apply': turn a photo as its EXIF orientation says, boxes in the "
                         "frame a viewer shows; 'ignore': the stored pixels",
                choices=EXIF_CHOICES)


def class_map_flag():
    """``--class-map``: None, the dataset's classes are the artifact's; else pairs (dataset
    class, artifact class), see :func:`zoo.jobs.datasets.class_lookup`."""
    return flag(None, "score a dataset of some of the artifact's classes, or renamed ones: "
                      "each dataset class is the artifact class of the same name unless mapped "
                      "here, e.g. 'car=automobile' ('' for names only); detections of the "
                      "artifact's other classes are dropped (default: the dataset's classes "
                      "must be the artifact's, in order)",
                type=comma_list(class_pair), metavar="DATA=ARTIFACT,...")


def progress_flag():
    return flag(True, "no progress bar (log lines only)")


def existing_folder(value):
    """A folder that exists."""
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError("must be an existing folder, got %r (%s)" % (
            value, "a file" if os.path.exists(value) else "no such folder"))
    return value


def class_pair(value):
    """``DATASET_CLASS=ARTIFACT_CLASS``."""
    dataset_class, equals, artifact_class = value.partition("=")
    if not (equals and dataset_class.strip() and artifact_class.strip()):
        raise argparse.ArgumentTypeError("must be comma-separated DATASET_CLASS=ARTIFACT_CLASS "
                                         "pairs, got %r" % value)
    return dataset_class.strip(), artifact_class.strip()
