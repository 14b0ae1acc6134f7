"""Detection datasets, augmentation and batching for training and evaluation.

Every dataset has ``class_names``, ``records`` (ground truth in pixels, no
decoding needed) and items ``(image, label)``: an HxWx3 uint8 RGB array and an
(M, 6) float32 label ``[class_id, x1, y1, x2, y2, difficult]`` in pixels.
Transforms turn an item into a (3, h, w) float32 array and a label with boxes
normalised to [0, 1]; the loader batches them with labels padded by -1 rows, and
pads images of different sizes onto one canvas (``Batch.im_info``).

The RecordIO names (MXNet's format) are imported on first use (:func:`__getattr__`): the
rest, which inference needs, loads no MXNet.
"""
import importlib

from zoo.data.coco import COCODataset
from zoo.data.dataset import DetectionDataset
from zoo.data.loader import Batch, DetectionLoader
from zoo.data.records import Record
from zoo.data.transforms import (MEAN_PIXELS, STD_PIXELS, ShortSideTrainTransform,
                                 ShortSideValTransform, TrainTransform, ValTransform,
                                 inference_transform, train_transform)
from zoo.data.voc import VOC_CLASSES, VOCDataset

RECORDIO = ("LstDataset", "RecordDataset", "write_record_files")

__all__ = ["Batch", "COCODataset", "DetectionDataset", "DetectionLoader", "LstDataset",
           "MEAN_PIXELS", "Record", "RecordDataset", "STD_PIXELS", "ShortSideTrainTransform",
           "ShortSideValTransform", "TrainTransform", "VOCDataset", "VOC_CLASSES",
           "ValTransform", "inference_transform", "train_transform",
           "write_record_files"]


def __getattr__(name):
    """A name of :data:`RECORDIO`, imported now (its module imports MXNet)."""
    if name in RECORDIO:
        return getattr(importlib.import_module(".recordio", __name__), name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
