"""Open a dataset by kind and split, as the command-line tools name them."""
import os

from zoo.errors import OptionsError
from zoo.data import embedded
from zoo.data.coco import COCODataset
from zoo.data.voc import VOCDataset

__all__ = ["KINDS", "needs_root", "open_dataset"]

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
    instances_<split>.json`` and ``root/<split>``; other kinds refuse them. ``root`` may be
    None where it is not read (:func:`needs_root`)."""
    if kind != "coco" and (annotations or image_dir):
        raise OptionsError("--annotations and --image-dir are for --dataset coco, not %r"
                           % kind)
    if root is None and needs_root(kind, annotations, image_dir):
        raise OptionsError("--data-root: needed for --dataset %s%s" % (
            kind, " unless --annotations and --image-dir name the split's file and folder"
            if kind == "coco" else ""))
    if kind == "embedded":
        embedded.generate(root)
        return VOCDataset(root, split, skip_bad=skip_bad)
    if kind == "voc":
        return VOCDataset(root, split, skip_bad=skip_bad)
    if kind == "coco":
        return COCODataset(coco_path(annotations, root, COCO_ANNOTATIONS, split),
                           coco_path(image_dir, root, COCO_IMAGES, split), skip_bad=skip_bad)
    # RecordIO is MXNet's format: imported here, so that the other kinds need no MXNet (and
    # the command line can check the environment MXNet reads before it loads).
    if kind == "rec":
        from zoo.data.recordio import RecordDataset
        return RecordDataset(os.path.join(root, split + ".rec"), skip_bad=skip_bad)
    if kind == "lst":
        from zoo.data.recordio import LstDataset
        return LstDataset(os.path.join(root, split + ".lst"), root, skip_bad=skip_bad)
    raise ValueError("unknown dataset kind %r; choose one of %s" % (kind, ", ".join(KINDS)))


def needs_root(kind, annotations=None, image_dir=None):
    """Whether a dataset of ``kind`` is read from its root folder: every kind but a COCO
    split whose annotation file and image folder are both named."""
    return not (kind == "coco" and annotations and image_dir)


def coco_path(given, root, default, split):
    """A COCO split's file or folder: ``given`` as written (relative to the working
    folder), else ``default`` under ``root``; ``{split}`` in it is the split."""
    template = given if given else os.path.join(root, default)
    return template.replace("{split}", split)
