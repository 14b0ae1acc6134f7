"""Open a dataset by kind and split, as the command-line tools name them."""
import os

from zoo.errors import OptionsError
from zoo.data import embedded
from zoo.data.coco import COCODataset
from zoo.data.voc import VOCDataset

__all__ = ["KINDS", "open_dataset"]

KINDS = ("embedded", "voc", "coco", "rec", "lst")
DEFAULT_SPLITS = {"train": "train", "val": "val"}
COCO_ANNOTATIONS = os.path.join("annotations", "instances_{split}.json")
"""Where a COCO split's annotation file is, under the root, unless named."""
COCO_IMAGES = "{split}"
"""Where a COCO split's images are, under the root, unless named."""


def open_dataset(kind, root, split, skip_bad=False, annotations=None, image_dir=None):
    """A dataset of ``kind``; ``split`` is a VOC image set, a COCO split, or a ``.rec``/
    ``.lst`` file name inside ``root``. ``embedded`` generates the shapes dataset into
    ``root`` first. A COCO split reads ``annotations`` and the images in ``image_dir``
    (``{split}`` in either is the split), by default ``root/annotations/
    instances_<split>.json`` and ``root/<split>``; other kinds refuse them."""
    if kind != "coco" and (annotations or image_dir):
        raise OptionsError("--annotations and --image-dir are for --dataset coco, not %r"
                           % kind)
    if kind == "embedded":
        embedded.generate(root)
        return VOCDataset(root, split, skip_bad=skip_bad)
    if kind == "voc":
        return VOCDataset(root, split, skip_bad=skip_bad)
    if kind == "coco":
        return COCODataset(coco_path(annotations, root, COCO_ANNOTATIONS, split),
                           coco_path(image_dir, root, COCO_IMAGES, split), skip_bad=skip_bad)
    # Imported here: the record readers load MXNet, which the command line (importing KINDS
    # from here) must not load before it has checked the environment MXNet reads.
    from zoo.data.recordio import LstDataset, RecordDataset
    if kind == "rec":
        return RecordDataset(os.path.join(root, split + ".rec"), skip_bad=skip_bad)
    if kind == "lst":
        return LstDataset(os.path.join(root, split + ".lst"), root, skip_bad=skip_bad)
    raise ValueError("unknown dataset kind %r; choose one of %s" % (kind, ", ".join(KINDS)))


def coco_path(given, root, default, split):
    """A COCO split's file or folder: ``given`` as written (relative to the working
    folder), else ``default`` under ``root``; ``{split}`` in it is the split."""
    template = given if given else os.path.join(root, default)
    return template.replace("{split}", split)
