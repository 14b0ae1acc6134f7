"""Tiles of photos: the one grid training and detection cut photos by (:class:`Tiling`,
:func:`windows`: the whole photo, then overlapping square tiles; tiled detection,
:mod:`zoo.inference.tiles`, runs it), and training on tiles: a dataset's photos cut into
those windows as they load, so that the network learns small objects at the scale tiled
detection shows them. No tile is written to disk.

Each window is an item of :class:`TiledDataset`, its boxes those of the photo clipped to it
(a box cut by its edge kept when at least :data:`MIN_KEPT` of it lies inside), except a
tiled photo's whole window where each of its boxes lies whole in a tile
(:func:`trained_windows`): the tiles teach those boxes larger. Windows with
a box are trained every epoch; windows without one (most of a photo of a few small objects)
are drawn afresh each epoch, ``empty_tiles`` of them per window with a box, at least one
of each photo that has no box at all, so that every epoch sees every photo
(:meth:`TiledDataset.epoch_items`)."""
import collections
import math
import threading
from dataclasses import dataclass

import numpy as np

from zoo.data.conventions import pixel_offset
from zoo.data.dataset import DetectionDataset
from zoo.data.records import Record
from zoo.errors import OptionsError

__all__ = ["DEFAULT_EMPTY_TILES", "DEFAULT_OVERLAP", "MIN_KEPT", "MIN_TILE", "TiledDataset",
           "Tiling", "recorded_tiling", "tile_starts", "tiles_record", "tiling",
           "trained_windows", "window_record", "windows"]

DEFAULT_OVERLAP = 0.2
"""The share of a tile's side its neighbours overlap unless asked otherwise (SAHI's default):
an object up to a fifth of a tile across lies whole in one tile or the other."""
MIN_TILE = 64
"""The smallest tile side, in pixels: smaller tiles hold too little around an object to tell
what it is, and a 12-megapixel photo would be thousands of them."""
MIN_KEPT = 0.5
"""The share of a box's area that must lie inside a window for the window to keep (the
clipped part of) it. At least half of an object still shows what it is, and the network
learns to find objects cut by a tile's edge, whose pieces the tiled merge joins back
(:func:`zoo.inference.tiles.merge`); a smaller sliver shows too little to tell and is left
out. Nothing is lost by it: the tiles overlap (:data:`DEFAULT_OVERLAP`
of their side), so an object up to that share of a tile lies whole in a neighbour."""
DEFAULT_EMPTY_TILES = 0.5
"""Windows without a box trained each epoch per window with one: enough background (the
photo's distractors) that the network does not fire on every tile it sees at detection,
where most tiles hold nothing, without drowning the few tiles that hold objects."""
PHOTO_CACHE_BYTES = 384 << 20
"""Decoded photos kept for their next windows: a 1600x1200 photo is decoded once for the
several windows an epoch draws from it while it is in (66 such photos fit; a 4000x3000 one
holds 36 MB)."""
EMPTY_DRAW_KEY = (0, 0, 0)
"""Appended to ``[seed, epoch]`` for the RandomState drawing an epoch's empty windows: five
numbers, as no sample's key (three or four, :func:`zoo.data.loader.sample_rng`) or the
epoch's order's (two) is."""


@dataclass(frozen=True)
class Tiling:
    """Square tiles of ``size`` pixels of the photo, neighbours sharing at least ``overlap``
    of a tile's side; refused in one line (:class:`zoo.errors.OptionsError`) outside
    ``size >= MIN_TILE`` and ``0 <= overlap < 1``."""
    size: int
    overlap: float = DEFAULT_OVERLAP

    def __post_init__(self):
        if isinstance(self.size, bool) or not isinstance(self.size, (int, np.integer)) \
                or self.size < MIN_TILE:
            raise OptionsError("tiles: the tile side must be a whole number of pixels, at "
                               "least %d, got %r" % (MIN_TILE, self.size))
        if not 0.0 <= self.overlap < 1.0:
            raise OptionsError("tile overlap must be in [0, 1) (a share of the tile's side), "
                               "got %r" % (self.overlap,))


def tiling(size, overlap=None):
    """The :class:`Tiling` of a tile side and overlap as a user gives them (None: no tiles,
    the default overlap); an overlap without a tile side is refused, never ignored."""
    if size is None:
        if overlap is not None:
            raise OptionsError("a tile overlap (%r) needs a tile size: give --tiles SIZE "
                               "(tiles= in Python) too" % (overlap,))
        return None
    return Tiling(size, DEFAULT_OVERLAP if overlap is None else overlap)


def tiles_record(tiles):
    """What an artifact records of the :class:`Tiling` its model was trained on (JSON):
    ``{"size", "overlap"}``, None for whole photos."""
    return None if tiles is None else {"size": int(tiles.size), "overlap": float(tiles.overlap)}


def recorded_tiling(record):
    """The :class:`Tiling` of an artifact's record (:func:`tiles_record`), None for none."""
    return None if not record else Tiling(int(record["size"]), float(record["overlap"]))


def tile_starts(length, tile, overlap):
    """Where tiles of ``tile`` pixels start along a side of ``length``: as few as keep each
    pair of neighbours sharing at least ``overlap * tile`` pixels, spread evenly from 0 to
    ``length - tile``. The last tile ends on the border instead of hanging over it, so every
    tile has one shape (they batch together) and holds only photo."""
    if length <= tile:
        return [0]
    stride = max(1, math.floor(tile * (1.0 - overlap)))  # whole pixels: rounding never
    count = math.ceil((length - tile) / stride) + 1      # shrinks an overlap below the asked
    return [index * (length - tile) // (count - 1) for index in range(count)]


def windows(width, height, tiles):
    """The windows ``(x0, y0, x1, y1)`` a photo of ``width`` x ``height`` runs: the whole
    photo first, then the tiles (none where the photo fits in one tile: its full pass sees it
    at least as large as a tile would). A tile is square unless the photo is narrower."""
    full = (0, 0, width, height)
    if width <= tiles.size and height <= tiles.size:
        return [full]
    tile_w, tile_h = min(tiles.size, width), min(tiles.size, height)
    return [full] + [(x, y, x + tile_w, y + tile_h)
                     for y in tile_starts(height, tile_h, tiles.overlap)
                     for x in tile_starts(width, tile_w, tiles.overlap)]


def trained_windows(record, tiles, offset=0):
    """The windows of ``record``'s photo (:func:`windows`) a run on ``tiles`` trains: all of
    them, less the whole photo where it is tiled and each of its boxes lies whole in a tile
    (``offset`` 1 for inclusive corners). Such boxes are what tiles are for, small: the
    whole photo shrunk to the input makes them a few pixels, under the smallest anchor,
    which matches each all the same with box targets far outside a tile's (on 1600x1200
    photos of birds 1-5% of the long side in 320-pixel tiles at 192, the trivial
    predictor's box_loss on the first batch 6.2 with them, 3.2-3.7 without) while the
    tiles show every one of them larger. A box no tile holds whole (an object larger than
    the tiles' overlap) keeps the whole photo trained: it is that object's only whole view,
    as in tiled detection (:func:`zoo.inference.tiles.merge`)."""
    every = windows(record.width, record.height, tiles)
    if len(every) == 1:
        return every
    boxes = np.asarray(record.boxes, np.float64).reshape(-1, 4)
    tiled = np.asarray(every[1:], np.float64)
    inside = ((boxes[:, None, 0] >= tiled[None, :, 0]) & (boxes[:, None, 1] >= tiled[None, :, 1])
              & (boxes[:, None, 2] <= tiled[None, :, 2] - offset)
              & (boxes[:, None, 3] <= tiled[None, :, 3] - offset))
    return every if len(boxes) and not inside.any(axis=1).all() else every[1:]


def window_record(record, window, offset=0, min_kept=MIN_KEPT):
    """The :class:`Record` of ``window`` ``(x0, y0, x1, y1)`` of ``record``'s photo: its
    boxes clipped to the window and shifted to its corner, those with at least ``min_kept``
    of their area inside (measured ``offset`` pixels wider, 1 for inclusive corners:
    :func:`zoo.data.conventions.pixel_offset`)."""
    x0, y0, x1, y1 = window
    boxes = np.asarray(record.boxes, np.float64).reshape(-1, 4)
    clipped = np.column_stack([np.maximum(boxes[:, 0], x0), np.maximum(boxes[:, 1], y0),
                               np.minimum(boxes[:, 2], x1 - offset),
                               np.minimum(boxes[:, 3], y1 - offset)])
    inside = (np.clip(clipped[:, 2] - clipped[:, 0] + offset, 0, None)
              * np.clip(clipped[:, 3] - clipped[:, 1] + offset, 0, None))
    whole = (boxes[:, 2] - boxes[:, 0] + offset) * (boxes[:, 3] - boxes[:, 1] + offset)
    keep = (inside > 0) & (inside >= min_kept * whole)
    return Record(path=record.path, width=x1 - x0, height=y1 - y0,
                  boxes=(clipped[keep] - [x0, y0, x0, y0]).astype(np.float32),
                  class_ids=np.asarray(record.class_ids)[keep],
                  difficult=np.asarray(record.difficult)[keep], key=(record.key, tuple(window)),
                  orientation=record.orientation)


class TiledDataset(DetectionDataset):
    """The windows of ``dataset``'s photos in ``tiles`` (a :class:`Tiling`) a run trains
    (:func:`trained_windows`) as items:
    ``records`` one per window (:func:`window_record`), ``dataset[i]`` window ``i`` cut from
    its decoded photo with its label. ``photos[i]`` is the index in ``dataset`` of window
    ``i``'s photo. A loader runs the items :meth:`epoch_items` draws for its epoch."""

    def __init__(self, dataset, tiles, empty_tiles=DEFAULT_EMPTY_TILES, min_kept=MIN_KEPT):
        offset = pixel_offset(dataset.box_convention)
        records, photos, self.windows = [], [], []
        for index, record in enumerate(dataset.records):
            for window in trained_windows(record, tiles, offset):
                records.append(window_record(record, window, offset, min_kept))
                photos.append(index)
                self.windows.append(window)
        super().__init__(records, dataset.class_names, dataset.box_convention)
        self.dataset, self.tiles, self.empty_tiles = dataset, tiles, empty_tiles
        self.source, self.category_ids = dataset.source, dataset.category_ids
        self.photos = np.array(photos, np.int64)
        boxed = np.array([len(record.boxes) > 0 for record in records], bool)
        self.boxed, self.empty = np.flatnonzero(boxed), np.flatnonzero(~boxed)
        # The windows of each photo with no box in any window: one is drawn every epoch.
        bare = np.setdiff1d(np.arange(len(dataset.records)), self.photos[self.boxed])
        self.bare = [np.flatnonzero(self.photos == photo) for photo in bare]
        self.cache = PhotoCache(PHOTO_CACHE_BYTES)

    def epoch_items(self, seed, epoch):
        """The windows epoch ``epoch`` trains, in index order: every window with a box, and
        ``empty_tiles`` as many without (all there are, at most), drawn from ``(seed,
        epoch)``; among them one window of each photo without a box."""
        rng = np.random.RandomState([seed, epoch, *EMPTY_DRAW_KEY])
        wanted = min(len(self.empty), max(len(self.bare),
                                          int(round(self.empty_tiles * len(self.boxed)))))
        chosen = np.array([rng.choice(windows_of) for windows_of in self.bare], np.int64)
        rest = np.setdiff1d(self.empty, chosen)
        drawn = rng.choice(rest, wanted - len(chosen), replace=False)
        return np.sort(np.concatenate([self.boxed, chosen, drawn]).astype(np.int64))

    def whole_photos(self):
        """How many of the windows are whole photos (:func:`trained_windows`)."""
        records = self.dataset.records
        return sum(tuple(window) == (0, 0, records[photo].width, records[photo].height)
                   for window, photo in zip(self.windows, self.photos))

    def epoch_photos(self, items):
        """The photos (indices in the dataset) the windows ``items`` come from."""
        return np.unique(self.photos[np.asarray(items, np.int64)])

    def __getitem__(self, index):
        x0, y0, x1, y1 = self.windows[index]
        photo = self.photo(int(self.photos[index]))
        return np.ascontiguousarray(photo[y0:y1, x0:x1]), self.records[index].label()

    def photo(self, index):
        """The decoded photo ``index`` of the dataset (from the cache if it holds it)."""
        image = self.cache.get(index)
        if image is None:
            image, _ = self.dataset[index]
            self.cache.put(index, image)
        return image

    def image_path(self, index):
        return self.dataset.image_path(int(self.photos[index]))

    def dropped(self):
        return self.dataset.dropped()

    def __repr__(self):
        return "%s(%d windows of %r in %d-pixel tiles)" % (
            type(self).__name__, len(self), self.dataset, self.tiles.size)


class PhotoCache:
    """Decoded photos, the most recently used kept up to ``limit`` bytes (thread-safe: the
    loader's workers share it)."""

    def __init__(self, limit):
        self.limit, self.held = limit, 0
        self.images = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            image = self.images.get(key)
            if image is not None:
                self.images.move_to_end(key)
            return image

    def put(self, key, image):
        with self.lock:
            if key in self.images or image.nbytes > self.limit:
                return
            self.images[key] = image
            self.held += image.nbytes
            while self.held > self.limit:
                _, old = self.images.popitem(last=False)
                self.held -= old.nbytes
