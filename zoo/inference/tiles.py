"""Tiled detection, for small objects in large photos; loads no MXNet.

A detector resizes the whole photo to its input size: a 4000x3000 photo reaches a 192-pixel
SSD 21 times smaller, and an object 2% of its side as 4 pixels, too few to be found. Tiled
detection also runs overlapping square windows of the photo (tiles of ``size`` pixels, each
resized to the input size alone, so the object arrives ``4000 / size`` times larger), maps
their boxes back to the photo's pixels and merges them with the full pass's (:func:`merge`).
The full pass is kept, as SAHI keeps it (its issue #274): an object larger than a tile is
only ever seen cut in pieces by the tiles.

Every runtime runs tiles the same way: the tiles and the full pass of a photo are one source
of the detector's own batch runner (:class:`zoo.inference.runner.BatchRunner`), so they run
in batches on whatever engine it has, while the next photo is decoded (:func:`tiled_outputs`).
"""
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# The grid, shared with training on tiles (zoo.data.tiles), is handed on from here too.
from zoo.data.tiles import (DEFAULT_OVERLAP, MIN_TILE, Tiling, recorded_tiling, tile_starts,
                            tiles_record, tiling, windows)
from zoo.errors import OptionsError
from zoo.progress import NoBar, progress_bar

__all__ = ["CONTAINED", "CUT_MARGIN", "DEFAULT_OVERLAP", "MERGE_IOU", "MIN_TILE", "Tiling",
           "check_tile_flags", "cut_edges", "detector_outputs", "merge", "nms", "photo_rows",
           "recorded_tiling", "run_tiling", "tile_starts", "tiled_outputs", "tiles_record",
           "tiling", "windows"]

CUT_MARGIN = 0.02
"""How close to a tile's inner edge (one not on the photo's border), as a share of the tile's
side, a box's edge marks it as cut there: a network stops a cut object's box at the edge or a
few pixels short of it."""
CONTAINED = 0.6
"""The share of a cut box that a whole box of its class must cover to stand for it: a piece
of an object lies inside the object's box."""
WHOLE_SCORE = 0.5
"""A whole box stands for a cut one only when it scores at least this share of the cut one's
score: a faint box of the full pass (a guess at a region full of objects) must not drop a
confident piece found nowhere else."""
MERGE_IOU = 0.5
"""Boxes of one class overlapping at least this IoU are one object (the higher score kept):
the full pass and the tiles, or two tiles' overlap, see the same object with slightly
different boxes."""


def check_tile_flags(size, overlap):
    """Refuse, before the slow part, the tile flags of a command running a checkpoint
    (``zoo detect``, ``zoo eval``): a size under :data:`MIN_TILE` or an overlap out of
    range, an overlap with ``--tiles 0``. An overlap alone waits for the checkpoint
    (:func:`run_tiling`)."""
    if size == 0:
        if overlap is not None:
            raise OptionsError("a tile overlap (%r) with --tiles 0 (no tiles): drop one"
                               % (overlap,))
    elif size is not None:
        tiling(size, overlap)
    elif overlap is not None:
        tiling(MIN_TILE, overlap)  # the overlap's range


def run_tiling(size, overlap, trained):
    """The :class:`Tiling` a checkpoint runs at, as ``zoo detect`` and ``zoo eval`` take
    ``--tiles`` and ``--tile-overlap``: ``size`` 0 runs whole photos only; None runs the
    tiles the checkpoint was trained on (``trained``, its overlap replaced by ``overlap``
    if given), else none; any other size is :func:`tiling`'s."""
    check_tile_flags(size, overlap)
    if size == 0:
        return None
    if size is None and trained is not None:
        return trained if overlap is None else Tiling(trained.size, overlap)
    if size is None and overlap is not None:
        raise OptionsError("a tile overlap (%r) needs a tile size: give --tiles SIZE (tiles= "
                           "in Python) too; the checkpoint was not trained on tiles"
                           % (overlap,))
    return tiling(size, overlap)


def cut_edges(rows, window, width, height):
    """Whether each box of ``rows`` (corners normalised to its ``window``) ends on one of the
    window's inner edges, where the tile cuts the photo and may cut an object."""
    x0, y0, x1, y1 = window
    inner = np.array([x0 > 0, y0 > 0, x1 < width, y1 < height])
    near = np.column_stack([rows[:, 2] <= CUT_MARGIN, rows[:, 3] <= CUT_MARGIN,
                            rows[:, 4] >= 1.0 - CUT_MARGIN, rows[:, 5] >= 1.0 - CUT_MARGIN])
    return (near & inner).any(axis=1)


def to_photo(rows, window, width, height):
    """``rows`` with corners normalised to ``window`` normalised to the whole photo instead."""
    x0, y0, x1, y1 = window
    mapped = rows.copy()
    mapped[:, [2, 4]] = (x0 + rows[:, [2, 4]] * (x1 - x0)) / width
    mapped[:, [3, 5]] = (y0 + rows[:, [3, 5]] * (y1 - y0)) / height
    return mapped


def areas(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def intersections(box, boxes):
    """The area ``box`` shares with each of ``boxes`` (corners, one unit for both)."""
    width = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])
    height = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])
    return np.clip(width, 0, None) * np.clip(height, 0, None)


def covered(rows, cut):
    """Whether each cut box of ``rows`` lies mostly (:data:`CONTAINED`) inside a whole box of
    its class that scores about as well (:data:`WHOLE_SCORE`): the neighbour tile, or the full
    pass, holds the whole object, so the piece is a duplicate of it."""
    whole = rows[~cut]
    result = np.zeros(len(rows), bool)
    for index in np.flatnonzero(cut):
        row = rows[index]
        same = whole[(whole[:, 0] == row[0]) & (whole[:, 1] >= WHOLE_SCORE * row[1])]
        area = max(float(areas(row[None, 2:6])[0]), 1e-12)
        result[index] = bool((intersections(row[2:6], same[:, 2:6]) >= CONTAINED * area).any())
    return result


def nms(rows, threshold=MERGE_IOU):
    """Class-wise greedy non-maximum suppression of ``rows``, best score first."""
    rows = rows[np.argsort(-rows[:, 1], kind="stable")]
    # Each class moved 2 units away (corners are within [0, 1]): no two classes ever overlap.
    boxes = rows[:, 2:6] + 2.0 * rows[:, :1]
    box_areas = areas(boxes)
    order, kept = np.arange(len(rows)), []
    while order.size:
        best, rest = order[0], order[1:]
        kept.append(best)
        shared = intersections(boxes[best], boxes[rest])
        iou = shared / np.maximum(box_areas[best] + box_areas[rest] - shared, 1e-12)
        order = rest[iou < threshold]
    return rows[kept]


def merge(rows, cut):
    """One photo's detections from the full pass's and the tiles' ``rows`` (normalised to the
    photo): the pieces of objects a tile edge cut dropped where a whole box holds them
    (:func:`covered`; a piece alone, of an object larger than any overlap the full pass
    missed, is kept), then duplicates removed (:func:`nms`)."""
    return nms(rows[~(cut & covered(rows, cut))])


def photo_rows(runner, image, tiles, batch_size, score_threshold=0.0):
    """The merged rows (normalised to the photo, best first) of an RGB ``image`` run whole and
    in tiles through ``runner`` (a :class:`zoo.inference.runner.BatchRunner`), in batches of
    ``batch_size``; rows scoring under ``score_threshold`` take no part in the merge."""
    height, width = image.shape[:2]
    parts = windows(width, height, tiles)
    found, cut = [], []
    for index, rows, _ in runner.outputs(Windows(image, parts), batch_size):
        rows = rows[rows[:, 1] >= score_threshold]
        found.append(to_photo(rows, parts[index], width, height))
        cut.append(cut_edges(rows, parts[index], width, height))
    return merge(np.concatenate(found), np.concatenate(cut))


class Windows:
    """The windows of one photo as a source of the batch runner: each cut out as its own
    array (on the runner's worker threads)."""

    def __init__(self, image, parts):
        self.image, self.parts = image, parts

    def __len__(self):
        return len(self.parts)

    def load(self, index):
        x0, y0, x1, y1 = self.parts[index]
        return np.ascontiguousarray(self.image[y0:y1, x0:x1])


def tiled_outputs(runner, source, tiles, batch_size, score_threshold=0.0, progress=None):
    """What ``runner.outputs(source, batch_size)`` yields, ``(index, rows, (width,
    height))`` per image in order (None rows for one the source skips), each image run whole
    and in ``tiles`` (:func:`photo_rows`). The next image is decoded while this one's tiles
    run. ``progress``: a description for a progress bar of images on stderr (None: none)."""
    bar = NoBar() if progress is None else progress_bar(total=len(source), desc=progress,
                                                        unit="image")
    with ThreadPoolExecutor(1) as decoder:
        upcoming = decoder.submit(source.load, 0) if len(source) else None
        for index in range(len(source)):
            image = upcoming.result()
            if index + 1 < len(source):
                upcoming = decoder.submit(source.load, index + 1)
            if image is None:
                yield index, None, None
            else:
                rows = photo_rows(runner, image, tiles, batch_size, score_threshold)
                yield index, rows, (image.shape[1], image.shape[0])
            bar.update()
    bar.close()


def detector_outputs(runner, source, batch_size, tiles=None, score_threshold=0.0,
                     progress=None):
    """``runner.outputs`` of ``source``, or with ``tiles`` (a :class:`Tiling`) its tiled
    outputs (:func:`tiled_outputs`): the one place a caller chooses between them."""
    if tiles is None:
        return runner.outputs(source, batch_size, progress=progress)
    return tiled_outputs(runner, source, tiles, batch_size, score_threshold, progress)
