"""Pack a VOC or COCO dataset into MXNet ``PREFIX.lst``, ``.rec``, ``.idx`` and
``.classes.txt`` (im2rec detection format, boxes normalised to [0, 1]).

Every image is decoded once before it is packed; ``.lst`` image paths are relative to
the VOC root or the COCO image folder (``LstDataset``'s ``image_root``). A failed run
leaves no ``PREFIX.*.part`` files."""
from dataclasses import dataclass
from typing import Callable, Optional

from zoo.data.coco import COCODataset
from zoo.data.voc import VOCDataset
from zoo.errors import OptionsError
from zoo.flags import REQUIRED, flag, options_from

__all__ = ["FORMATS", "PrepareOptions", "prepare_data"]

FORMATS = ("voc", "coco")


@dataclass(frozen=True)
class PrepareOptions:
    """What ``zoo prepare-data`` packs: each field declares its flag (:mod:`zoo.flags`)."""
    format: str = flag(REQUIRED, "dataset format", choices=FORMATS)
    output: str = flag(REQUIRED, "output path without extension", metavar="PREFIX")
    root: Optional[str] = flag(None, "voc: the folder holding Annotations/ and JPEGImages/")
    split: str = flag("trainval", "voc: an image set of ImageSets/Main")
    annotations: Optional[str] = flag(None, "coco: the annotation JSON file")
    image_dir: Optional[str] = flag(None, "coco: the folder holding the images")
    skip_bad: bool = flag(False, "skip bad records with one warning instead of stopping")

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo prepare-data``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


@dataclass(frozen=True)
class PrepareResult:
    images: int
    objects: int
    classes: int


def open_source(options):
    """The dataset the options name."""
    needed = ("root",) if options.format == "voc" else ("annotations", "image_dir")
    for name in needed:
        if getattr(options, name) is None:
            raise OptionsError("format %s needs %s" % (options.format, name))
    if options.format == "voc":
        return VOCDataset(options.root, image_set=options.split, skip_bad=options.skip_bad)
    if options.format == "coco":
        return COCODataset(options.annotations, options.image_dir, skip_bad=options.skip_bad)
    raise OptionsError("format %r: expected one of %s" % (options.format, ", ".join(FORMATS)))


def prepare_data(options, progress: Optional[Callable[[int, int], None]] = None):
    """Write the record files; ``progress(done, total)`` is called after each image."""
    # Imported here: MXNet's record writer loads MXNet, which the options do without.
    from zoo.data.recordio import write_record_files
    dataset = open_source(options)
    image_root = options.root if options.format == "voc" else options.image_dir
    images, objects = write_record_files(dataset, options.output, progress=progress,
                                         image_root=image_root, skip_bad=options.skip_bad)
    return PrepareResult(images, objects, len(dataset.class_names))
