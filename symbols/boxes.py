"""Box geometry shared by data augmentation, training targets and evaluation."""
import numpy as np

__all__ = ["iou"]


def iou(boxes_a, boxes_b, offset=0.0):
    """IoU of every corner box ``[x1, y1, x2, y2, ...]`` in ``boxes_a`` (N, 4+) with every one
    in ``boxes_b`` (M, 4+): an (N, M) array, 0 where the union is empty.

    Widths and heights are ``x2 - x1 + offset``: 0 reads corners as continuous coordinates
    (augmentation, SSD), 1 as inclusive pixel indices (the VOC devkit, GluonCV's metrics).
    Float32 boxes give float32 IoUs.
    """
    top_left = np.maximum(boxes_a[:, None, :2], boxes_b[None, :, :2])
    bottom_right = np.minimum(boxes_a[:, None, 2:4], boxes_b[None, :, 2:4])
    overlap = np.clip(bottom_right - top_left + offset, 0, None).prod(axis=2)
    area_a = (boxes_a[:, 2:4] - boxes_a[:, :2] + offset).prod(axis=1)
    area_b = (boxes_b[:, 2:4] - boxes_b[:, :2] + offset).prod(axis=1)
    union = area_a[:, None] + area_b[None, :] - overlap
    out = np.zeros(union.shape, np.result_type(union, np.float32))
    return np.divide(overlap, union, out=out, where=union > 0)
