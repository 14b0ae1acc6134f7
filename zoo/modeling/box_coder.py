"""Anchor generation and box encoding in the Faster R-CNN ("+1 pixel") convention,
which MXNet's ``Proposal``/``MultiProposal`` operators use: a box [x1, y1, x2, y2]
covers x2 - x1 + 1 pixels. The training targets here must agree with how those
operators decode, so the convention is kept in one place.
"""
import numpy as np


def base_anchors(stride, scales, ratios):
    """``(len(ratios) * len(scales), 4)`` anchors centred on the first cell, ratio-major,
    exactly as ``MultiProposal`` enumerates them (sizes rounded the same way)."""
    side = float(stride)
    centre = 0.5 * (side - 1)
    anchors = []
    for ratio in ratios:
        base_w = np.floor(np.sqrt(np.floor(side * side / ratio)) + 0.5)
        base_h = np.floor(base_w * ratio + 0.5)
        for scale in scales:
            w, h = base_w * scale, base_h * scale
            anchors.append([centre - 0.5 * (w - 1), centre - 0.5 * (h - 1),
                            centre + 0.5 * (w - 1), centre + 0.5 * (h - 1)])
    return np.array(anchors, dtype=np.float32)


def grid_anchors(stride, scales, ratios, height, width):
    """``(A * height * width, 4)`` anchors in (anchor, row, column) order, the order of an
    RPN score map ``(B, A, height, width)`` flattened."""
    base = base_anchors(stride, scales, ratios)
    shift_x, shift_y = np.meshgrid(np.arange(width) * stride, np.arange(height) * stride)
    shifts = np.stack([shift_x, shift_y, shift_x, shift_y], axis=-1).astype(np.float32)
    return (base[:, None, None, :] + shifts[None]).reshape(-1, 4)


def encode(boxes, targets, stds=(1.0, 1.0, 1.0, 1.0), pixel=1.0):
    """Regression targets (dx, dy, dw, dh) / stds that move ``boxes`` onto ``targets``.

    ``pixel=1`` is the +1 convention of ``MultiProposal``; ``pixel=0`` the continuous
    one of ``box_decode``, which the second stage uses.
    """
    w = boxes[:, 2] - boxes[:, 0] + pixel
    h = boxes[:, 3] - boxes[:, 1] + pixel
    cx, cy = boxes[:, 0] + 0.5 * (w - pixel), boxes[:, 1] + 0.5 * (h - pixel)
    tw = targets[:, 2] - targets[:, 0] + pixel
    th = targets[:, 3] - targets[:, 1] + pixel
    tcx, tcy = targets[:, 0] + 0.5 * (tw - pixel), targets[:, 1] + 0.5 * (th - pixel)
    deltas = np.stack([(tcx - cx) / w, (tcy - cy) / h, np.log(tw / w), np.log(th / h)], axis=1)
    return (deltas / np.asarray(stds, dtype=np.float32)).astype(np.float32)
