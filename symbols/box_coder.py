"""Anchor generation and box encoding for Faster R-CNN, in the continuous convention of
GluonCV, Detectron2 and torchvision.

A box ``[x1, y1, x2, y2]`` is a rectangle in continuous pixel coordinates: its width is
``x2 - x1`` (no "+1"), its centre ``x1 + 0.5 * width``; the image ``height x width``
spans ``[0, width] x [0, height]``. Deltas ``(dx, dy, dw, dh)`` move a box of centre
``(cx, cy)`` and size ``(w, h)`` to centre ``(cx + dx w, cy + dy h)`` and size
``(w exp(dw), h exp(dh))``; decoding clips ``dw``, ``dh`` at :data:`DELTA_CLIP`
(``log(1000 / 16)``). Anchors of ``scale`` and ``ratio`` (height over width) on a stride-``s``
map have area ``(s * scale)^2``, width ``s * scale / sqrt(ratio)`` and height ``width *
ratio``, and are centred on their cell, ``((col + 0.5) s, (row + 0.5) s)``.

The RPN's proposal graph (:func:`symbols.rpn.proposals`) decodes with exactly
these anchors and this coding, and the training targets (:mod:`symbols.rcnn_targets`)
encode with them, so the convention is kept in one place.
"""
import math

import numpy as np

__all__ = ["DELTA_CLIP", "base_anchors", "decode", "encode", "grid_anchors", "shifted_anchors"]

DELTA_CLIP = math.log(1000.0 / 16)
"""Largest ``dw``/``dh`` decoding applies (Detectron2's ``scale_clamp``)."""


def base_anchors(stride, scales, ratios):
    """``(len(ratios) * len(scales), 4)`` anchors of the first cell (centre ``stride / 2``),
    ratio-major: anchor ``i`` is ``ratios[i // len(scales)]``, ``scales[i % len(scales)]``."""
    centre = 0.5 * stride
    anchors = []
    for ratio in ratios:
        for scale in scales:
            w = stride * scale / math.sqrt(ratio)
            h = w * ratio
            anchors.append([centre - 0.5 * w, centre - 0.5 * h, centre + 0.5 * w,
                            centre + 0.5 * h])
    return np.array(anchors, dtype=np.float32)


def grid_anchors(stride, scales, ratios, height, width):
    """``(A * height * width, 4)`` anchors in (anchor, row, column) order, the order of an
    RPN score map ``(B, A, height, width)`` flattened."""
    return shifted_anchors(base_anchors(stride, scales, ratios), stride, height, width)


def shifted_anchors(base, stride, height, width):
    """``(A * height * width, 4)`` anchors in (anchor, row, column) order: the first cell's
    ``base`` ``(A, 4)`` shifted by ``stride`` to every cell of a ``height x width`` map."""
    base = np.asarray(base, dtype=np.float32)
    shift_x, shift_y = np.meshgrid(np.arange(width) * stride, np.arange(height) * stride)
    shifts = np.stack([shift_x, shift_y, shift_x, shift_y], axis=-1).astype(np.float32)
    return (base[:, None, None, :] + shifts[None]).reshape(-1, 4)


def encode(boxes, targets, stds=(1.0, 1.0, 1.0, 1.0)):
    """Regression targets (dx, dy, dw, dh) / stds that move ``boxes`` onto ``targets``."""
    w = boxes[:, 2] - boxes[:, 0]
    h = boxes[:, 3] - boxes[:, 1]
    cx, cy = boxes[:, 0] + 0.5 * w, boxes[:, 1] + 0.5 * h
    tw = targets[:, 2] - targets[:, 0]
    th = targets[:, 3] - targets[:, 1]
    tcx, tcy = targets[:, 0] + 0.5 * tw, targets[:, 1] + 0.5 * th
    deltas = np.stack([(tcx - cx) / w, (tcy - cy) / h, np.log(tw / w), np.log(th / h)], axis=1)
    return (deltas / np.asarray(stds, dtype=np.float32)).astype(np.float32)


def decode(anchors, deltas, clip=DELTA_CLIP):
    """Boxes ``(N, 4)`` that ``deltas`` (unnormalised) make of ``anchors``: the inverse of
    :func:`encode`, with ``dw``, ``dh`` clipped at ``clip``."""
    w = anchors[:, 2] - anchors[:, 0]
    h = anchors[:, 3] - anchors[:, 1]
    cx, cy = anchors[:, 0] + 0.5 * w, anchors[:, 1] + 0.5 * h
    pcx, pcy = deltas[:, 0] * w + cx, deltas[:, 1] * h + cy
    pw = np.exp(np.minimum(deltas[:, 2], clip)) * w
    ph = np.exp(np.minimum(deltas[:, 3], clip)) * h
    return np.stack([pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph], axis=1)
