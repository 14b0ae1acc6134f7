"""Anchors against the training boxes: how many boxes the network's anchors can match at
all (the *best possible recall*, ultralytics' AutoAnchor figure, here at the network's own
matching IoU), and anchor sizes fitted to the boxes (``zoo train --fit-anchors``).

Both take the boxes as the network's input holds them before augmentation (each image
resized as the model resizes it: :func:`zoo.engine.health.census.box_sides`), and both
compare shapes only, each anchor centred on the box, as AutoAnchor compares them: the
figure is an upper bound, which the grid of anchor centres lowers for boxes smaller than
its stride. So the fit keeps every anchor at least as large as its map's stride (smaller
ones would leave boxes between their centres unmatched).

The fit is a quantile ladder, not AutoAnchor's k-means: an SSD's anchors are not free
``(width, height)`` pairs but, per feature map, a few sizes at the map's aspect ratios
(``MultiBoxPrior``), the sizes growing from map to map. The ladder spaces all the maps'
sizes geometrically from a low to a high quantile of the boxes' scale (the square root of
their area), each lifted to its map's stride, and keeps each map's number of sizes and its
ratios: the graph's heads keep their shapes (``--init-from`` and ``--resume`` still fit),
it needs no seed, and a box whose scale lies between two sizes is within a factor of the
ladder's step of one of them. Where the boxes are far from square (poles, text lines),
each map's ratios may also be shifted to the boxes' median aspect ratio
(:func:`shifted_ratios`): the architecture keeps that only where it matches more boxes.
Faster R-CNN's RPN anchors are fitted the same way: C4's scales (sizes in units of its
one stride) as one map's ladder, FPN's one size per level as a ladder over the levels.
"""
from dataclasses import dataclass

import numpy as np

__all__ = ["ASPECT_RANGE", "AnchorMap", "FIT_QUANTILES", "best_ious", "best_possible_recall",
           "ladder_sizes", "prior_shapes", "shifted_ratios"]

FIT_QUANTILES = (0.02, 0.98)
"""The boxes' scale quantiles the ladder's first and last sizes sit at: the outer 2% of
boxes still match the end sizes within their IoU tolerance (a factor of up to 1.4 at IoU
0.5), so a few outliers do not stretch the ladder."""
MIN_STEP = 2 ** 0.25
"""The smallest ratio between a size and the next: four sizes an octave (at IoU 0.5 one
size matches square boxes within a factor of 1.4 either way); closer sizes would match the
same boxes, where boxes span a narrow range or lie below the coarser maps' strides."""
ASPECT_RANGE = (0.05, 20)
"""The aspect ratios an anchor may have (an SSD config's bounds; the fit keeps Faster
R-CNN's within them too)."""
CHUNK = 65536
"""Boxes compared with every anchor at once (bounds the memory on COCO-sized splits)."""


@dataclass(frozen=True)
class AnchorMap:
    """One feature map's anchors: ``stride`` input pixels between their centres and
    ``shapes``, ``((width, height), ...)`` in input pixels."""
    stride: float
    shapes: tuple


def prior_shapes(sizes, ratios, side):
    """``((width, height), ...)`` in pixels of a square ``side`` input of ``MultiBoxPrior``'s
    anchors of ``sizes`` (fractions of the side) and ``ratios``: every size at the first
    ratio, then the first size at each other ratio (MXNet's order)."""
    pairs = [(size, ratios[0]) for size in sizes] + [(sizes[0], r) for r in ratios[1:]]
    return tuple((size * side * np.sqrt(r), size * side / np.sqrt(r)) for size, r in pairs)


def best_ious(sides, maps):
    """``(N,)``: each box's best IoU with an anchor shape of ``maps`` centred on it."""
    anchors = np.array([shape for level in maps for shape in level.shapes],
                       np.float64).reshape(-1, 2)
    best = np.zeros(len(sides))
    for start in range(0, len(sides), CHUNK):
        part = sides[start:start + CHUNK]
        inter = (np.minimum(part[:, None, 0], anchors[None, :, 0])
                 * np.minimum(part[:, None, 1], anchors[None, :, 1]))
        union = part.prod(axis=1)[:, None] + anchors.prod(axis=1)[None, :] - inter
        best[start:start + CHUNK] = (inter / union).max(axis=1, initial=0.0)
    return best


def best_possible_recall(sides, maps, threshold):
    """The share of boxes (``sides``, input pixels) some anchor of ``maps`` can match at IoU
    ``threshold``; 0 without a box."""
    if not len(sides):
        return 0.0
    return float((best_ious(sides, maps) >= threshold).mean())


def ladder_sizes(sides, counts, strides, largest):
    """Per map, ``counts[k]`` anchor sizes in input pixels fitted to the boxes ``sides``: a
    geometric ladder from the low to the high :data:`FIT_QUANTILES` of their scale (a step
    of at least :data:`MIN_STEP`), each size at least its map's stride (``strides[k]``; the
    ladder goes on from there) and at most ``largest``."""
    scales = np.sqrt(sides.prod(axis=1))
    low, high = np.quantile(scales, FIT_QUANTILES)
    size = max(low, strides[0])
    step = max((high / size) ** (1.0 / max(sum(counts) - 1, 1)), MIN_STEP)
    fitted = []
    for count, stride in zip(counts, strides):
        sizes = []
        for _ in range(count):
            # never smaller than the size before: SSD's sizes do not shrink on coarser maps
            size = min(max(size, stride), largest)
            sizes.append(size)
            size *= step
        fitted.append(sizes)
    return fitted


def shifted_ratios(sides, ratio_lists, low=ASPECT_RANGE[0], high=ASPECT_RANGE[1]):
    """Per map, its aspect ratios (width / height of ``sides``; pass them swapped for
    ratios of height / width) multiplied by the boxes' median aspect ratio, as far as all of
    them stay within [``low``, ``high``]: the map's spread of shapes kept (so its ratios
    stay distinct), centred on the boxes'."""
    median = float(np.median(sides[:, 0] / sides[:, 1]))
    shifted = []
    for ratios in ratio_lists:
        factor = min(max(median, low / min(ratios)), high / max(ratios))
        shifted.append([round(ratio * factor, 4) for ratio in ratios])
    return shifted
