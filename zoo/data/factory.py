"""Open a dataset by kind and split, as the command-line tools name them."""
import os

from zoo.data import embedded
from zoo.data.coco import COCODataset
from zoo.data.recordio import LstDataset, RecordDataset
from zoo.data.voc import VOCDataset

__all__ = ["KINDS", "open_dataset"]

KINDS = ("embedded", "voc", "coco", "rec", "lst")
DEFAULT_SPLITS = {"train": "train", "val": "val"}


def open_dataset(kind, root, split, skip_bad=False):
    """A dataset of ``kind``; ``split`` is a VOC image set, a COCO annotation file name
    inside ``root/annotations`` (``instances_<split>.json``), or a ``.rec``/``.lst`` file
    name inside ``root``. ``embedded`` generates the shapes dataset into ``root`` first."""
    if kind == "embedded":
        embedded.generate(root)
        return VOCDataset(root, split, skip_bad=skip_bad)
    if kind == "voc":
        return VOCDataset(root, split, skip_bad=skip_bad)
    if kind == "coco":
        return COCODataset(os.path.join(root, "annotations", "instances_%s.json" % split),
                           os.path.join(root, split), skip_bad=skip_bad)
    if kind == "rec":
        return RecordDataset(os.path.join(root, split + ".rec"), skip_bad=skip_bad)
    if kind == "lst":
        return LstDataset(os.path.join(root, split + ".lst"), root, skip_bad=skip_bad)
    raise ValueError("unknown dataset kind %r; choose one of %s" % (kind, ", ".join(KINDS)))
