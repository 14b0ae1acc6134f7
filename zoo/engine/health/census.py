"""Before training: the data census.

What each split holds, in one line each: images against distinct image files, boxes per
image, the class histogram, and the boxes lost on the way to the network (empty once
clipped to their image, or under a pixel at the model's input). Warned: a list whose
entries are mostly one file, a class without a training instance, many lost boxes.

Then what the network will see of the training boxes (:class:`BoxSizes`, one line): their
sides at its input (median and 10th percentile) against its smallest anchor and that
map's stride, and the share of boxes its anchors can match at all (the best possible
recall, :mod:`zoo.schema.anchors`). Warned, with the flags that apply: most boxes smaller
than the smallest anchor or the stride (train on tiles, fit the anchors, a larger input),
a zoom-out (``--max-expand``) that shrinks them below the smallest anchor, anchors that
can match under half the boxes.

Refused, whatever ``--no-health`` says (no run can learn from such data): boxes normalised
to [0, 1] where pixels are expected, a training split without a box, and ``--skip-bad``
dropping more than ``--max-skipped`` of a split's images.

Everything here reads the datasets' records: no image is decoded.
"""
import collections
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from zoo.data.coco import COCODataset
from zoo.data.voc import VOCDataset
from zoo.errors import DataError
from zoo.schema.anchors import best_possible_recall
from zoo.schema.preprocessing import input_size, scaled_size

__all__ = ["BoxSizes", "CHECK", "Census", "box_sides", "check_boxes_in_pixels",
           "check_has_boxes", "check_skipped", "report", "report_sizes", "take_census",
           "take_sizes"]

CHECK = "census"
"""The check's name in the health line and its warnings."""
NORMALISED_LIMIT = 1.5
"""A box none of whose corners exceeds this many pixels sits in its image's top-left
corner: as a whole split's, the mark of coordinates normalised to [0, 1]."""
NORMALISED_SHARE = 0.9
"""The share of a split's boxes that must look normalised for it to be refused."""
NORMALISED_MIN_SIDE = 32
"""Images whose shorter side is under this many pixels are left out of that judgement:
there 1.5 pixels could be a real box."""
REPEATED_SHARE = 0.5
"""A split with fewer distinct image files than this share of its entries is warned."""
LOST_SHARE = 0.1
"""A split losing more than this share of its boxes before the network is warned (a few
sub-pixel boxes are normal in COCO)."""
SMALL_SHARE = 0.5
"""Training boxes smaller than the smallest anchor or its stride are warned when they are
more than this share: most of them."""
LOW_RECALL = 0.5
"""Anchors that can match fewer than this share of the training boxes are warned."""
TARGET_STRIDES = 2
"""The median box a suggested ``--data-shape`` or ``--tiles`` aims at: the smallest anchor,
and at least this many strides of its map (make demo's network has 2.4)."""
SIZE_STEP = 32
"""Suggested input and tile sides are multiples of this (the deepest backbone stride)."""
LARGEST_SHAPE = 1024
"""The largest ``--data-shape`` the census suggests: 28x the pixels of make demo's 192 (a
CPU step costs as much more), where tiles give the boxes the same pixels for less."""


@dataclass(frozen=True)
class Census:
    """What one split holds. ``files`` counts distinct image files (None: the images live
    in a record file), ``repeated`` is the most listed file and its count; ``clipped``
    boxes are empty once clipped to their image, ``tiny`` ones under a pixel wide or high
    at the network's input (None: no input given)."""
    name: str
    source: str
    images: int
    files: Optional[int]
    repeated: tuple
    boxes: int
    most_boxes: int
    without_boxes: int
    class_names: tuple
    class_counts: tuple
    clipped: int
    tiny: Optional[int]
    input_size: str = ""

    @property
    def lost(self):
        return self.clipped + (self.tiny or 0)

    def histogram(self):
        """``circle 60, square 58, ...``."""
        return ", ".join("%s %d" % pair for pair in zip(self.class_names, self.class_counts))

    def line(self, role):
        """``census: train voc:data/train: 64 images (64 files), 180 boxes (...); ...``."""
        files = "" if self.files is None else " (%d file%s)" % (self.files,
                                                               "" if self.files == 1 else "s")
        boxes = "%d boxes (%.1f per image, at most %d; %d image%s without)" % (
            self.boxes, self.boxes / max(self.images, 1), self.most_boxes, self.without_boxes,
            "" if self.without_boxes == 1 else "s")
        return "census: %s %s: %d images%s, %s, %s; classes: %s" % (
            role, self.name, self.images, files, boxes, self.lost_text(), self.histogram())

    def lost_text(self):
        """How many boxes cannot reach the network, and why."""
        if not self.lost:
            return "none lost before the network"
        return "%d lost before the network (%s)" % (self.lost, self.lost_reasons())

    def lost_reasons(self):
        """``2 empty once clipped to the image, 1 under a pixel at the 128x128 input``."""
        reasons = ["%d empty once clipped to the image" % self.clipped] if self.clipped else []
        if self.tiny:
            reasons.append("%d under a pixel at the %s input" % (self.tiny, self.input_size))
        return ", ".join(reasons)


def take_census(dataset, name, preprocessing=None):
    """The :class:`Census` of ``dataset`` (named ``name`` in its lines), with the boxes
    under a pixel at the input ``preprocessing`` (a model's) describes, if given."""
    records = dataset.records
    table = box_table(records)
    paths = collections.Counter(record.path for record in records if record.path)
    classes = table.classes[(table.classes >= 0) & (table.classes < len(dataset.class_names))]
    sides = table.boxes[:, 2:] - table.boxes[:, :2]
    empty = (sides <= 0).any(axis=1)
    tiny = None
    if preprocessing is not None:
        scaled = sides * input_scale(table.sizes[:, 0], table.sizes[:, 1], preprocessing)
        tiny = int(((scaled < 1).any(axis=1) & ~empty).sum())
    # Images inside a record file have no path: their files cannot be told apart.
    return Census(name=name, source=str(dataset.source or name), images=len(records),
                  files=len(paths) if paths else None,
                  repeated=paths.most_common(1)[0] if paths else (None, 0),
                  boxes=len(table.boxes), most_boxes=int(table.counts.max(initial=0)),
                  without_boxes=int((table.counts == 0).sum()),
                  class_names=tuple(dataset.class_names),
                  class_counts=tuple(int(c) for c in np.bincount(
                      classes, minlength=len(dataset.class_names))),
                  clipped=int(empty.sum()), tiny=tiny,
                  input_size=input_size(preprocessing) if preprocessing is not None else "")


@dataclass(frozen=True)
class BoxTable:
    """Every box of a split's records at once: ``boxes`` (N, 4) corners in pixels,
    ``classes`` (N,), ``sizes`` (N, 2) the width and height of each box's image, ``owners``
    (N,) its record's index, ``counts`` the boxes of each record."""
    boxes: np.ndarray
    classes: np.ndarray
    sizes: np.ndarray
    owners: np.ndarray
    counts: np.ndarray


def box_table(records):
    """The :class:`BoxTable` of ``records`` (a split's whole census in a few array
    operations, whatever its size)."""
    counts = np.array([len(record.boxes) for record in records], np.int64)
    owners = np.repeat(np.arange(len(records)), counts)
    sizes = np.array([(record.width, record.height) for record in records],
                     np.float64).reshape(-1, 2)
    # make_record gives every record (M, 4) boxes and (M,) class ids
    return BoxTable(
        boxes=np.concatenate([r.boxes for r in records] + [np.zeros((0, 4))]).astype(np.float64),
        classes=np.concatenate([r.class_ids for r in records]
                               + [np.zeros(0, np.int64)]).astype(np.int64),
        sizes=sizes[owners], owners=owners, counts=counts)


def box_sides(dataset, preprocessing):
    """``(N, 2)`` widths and heights, in pixels of the model's input (``preprocessing``, a
    model's) before augmentation, of the boxes of ``dataset`` that keep an area."""
    table = box_table(dataset.records)
    sides = (table.boxes[:, 2:] - table.boxes[:, :2]) * input_scale(
        table.sizes[:, 0], table.sizes[:, 1], preprocessing)
    return sides[(sides > 0).all(axis=1)]


def input_scale(width, height, preprocessing):
    """``(x, y)`` pixels of the network's input per pixel of images of ``width`` x
    ``height`` (arrays), as the model's resize (:mod:`zoo.schema.preprocessing`) maps them
    before augmentation: ``(N, 2)``."""
    if preprocessing.get("resize") == "short_side":
        # once per distinct image size: a split has few (keyed as one number, faster than
        # unique rows)
        keys = np.asarray(width, np.float64) * 1e6 + np.asarray(height, np.float64)
        keys, inverse = np.unique(keys, return_inverse=True)
        sizes = np.column_stack([keys // 1e6, keys % 1e6])
        scales = np.array([scaled_size(h, w, preprocessing["short_side"],
                                       preprocessing["max_size"])[2] for w, h in sizes])
        scale = scales[inverse.reshape(-1)] if len(sizes) else np.zeros(0)
        return np.column_stack([scale, scale])
    input_height, input_width = preprocessing["data_shape"]
    return np.column_stack([input_width / width, input_height / height])


# -- refusals ---------------------------------------------------------------------------------

def check_skipped(dataset, name, max_skipped):
    """:class:`DataError` when ``skip_bad`` dropped more than the share ``max_skipped`` of
    the images ``dataset`` lists: a run on the few left would memorise them."""
    listed, dropped = dataset.listed, dataset.dropped()
    if listed and dropped > max_skipped * listed:
        raise DataError("%s: --skip-bad dropped %d of its %d images (%.0f%%), more than "
                        "--max-skipped %g allows (the warning above gives the first reason): "
                        "fix them, or raise --max-skipped" % (
                            name, dropped, listed, 100.0 * dropped / listed, max_skipped))


def check_boxes_in_pixels(dataset, name):
    """:class:`DataError` when nearly all boxes of ``dataset`` (in images of
    :data:`NORMALISED_MIN_SIDE` pixels and more) sit within :data:`NORMALISED_LIMIT`
    pixels of the top-left corner: coordinates normalised to [0, 1] where the zoo expects
    pixels. In the transform such boxes shrink to nothing and the loss to 0."""
    table = box_table(dataset.records)
    judged = table.sizes.min(axis=1, initial=np.inf) >= NORMALISED_MIN_SIDE
    small = judged & (table.boxes.max(axis=1, initial=-np.inf) <= NORMALISED_LIMIT)
    if not judged.any() or small.sum() < NORMALISED_SHARE * judged.sum():
        return
    record = dataset.records[int(table.owners[np.flatnonzero(small)[0]])]
    raise DataError(
        "%s: %d of its %d boxes (%.0f%%) lie within %g pixels of the top-left corner of "
        "images of %d pixels and more (first: image %s): the coordinates look normalised "
        "to [0, 1], but the zoo expects pixels; %s" % (
            name, small.sum(), judged.sum(), 100.0 * small.sum() / judged.sum(),
            NORMALISED_LIMIT, NORMALISED_MIN_SIDE,
            record.key if record.key is not None else record.path, pixel_advice(dataset)))


def pixel_advice(dataset):
    """How to turn the format's normalised boxes into pixels."""
    if isinstance(dataset, COCODataset):
        return ("multiply each bbox's x and w by its image's width, y and h by its height "
                "(COCO bbox is [x, y, w, h] in pixels)")
    return "multiply xmin and xmax by the image's width, ymin and ymax by its height"


def objects_advice(dataset):
    """Where the format lists an image's objects."""
    if isinstance(dataset, COCODataset):
        return ("check that the annotations of %s name its images' ids"
                % dataset.annotation_json)
    if isinstance(dataset, VOCDataset):
        return "check the <object> entries of %s" % os.path.join(dataset.root, "Annotations")
    return "check the labels of %s" % (dataset.source or "the dataset")


def check_has_boxes(dataset, name):
    """:class:`DataError` when no box of the training ``dataset`` keeps an area once
    clipped to its image: there is nothing to learn."""
    table = box_table(dataset.records)
    if ((table.boxes[:, 2:] - table.boxes[:, :2]) > 0).all(axis=1).any():
        return
    if not len(table.boxes):
        raise DataError("%s: none of its %d images has a box: there is nothing to train on; "
                        "%s" % (name, len(table.counts), objects_advice(dataset)))
    raise DataError("%s: all %d boxes of its %d images are empty once clipped to their image: "
                    "there is nothing to train on; check their coordinates in %s"
                    % (name, len(table.boxes), len(table.counts), dataset.source or name))


# -- the report -------------------------------------------------------------------------------

def report(health, train, val=None):
    """Record the census of the ``train`` and ``val`` :class:`Census` in ``health`` (a
    :class:`~zoo.engine.health.report.HealthReport`), warning about a list of repeated
    files, a class without a training instance and many lost boxes; returns the census
    lines to show, one per split."""
    censuses = [("train", train)] + ([("val", val)] if val is not None else [])
    for _, census in censuses:
        warn_repeated(health, census)
        warn_lost(health, census)
    warn_missing_classes(health, train, val)
    health.result(CHECK, "ok", "; ".join("%s %d images, %d boxes" % (role, c.images, c.boxes)
                                         for role, c in censuses))
    return [census.line(role) for role, census in censuses]


def warn_repeated(health, census):
    """Warn when the entries of a split are mostly a few files."""
    if census.files is None or census.files >= REPEATED_SHARE * census.images:
        return
    path, count = census.repeated
    health.warn(CHECK, "%s lists %d images but only %d distinct file%s (%s %d times): the "
                "run would learn these pictures by heart; look at %s" % (
                    census.name, census.images, census.files,
                    "" if census.files == 1 else "s", path, count, census.source))


def warn_lost(health, census):
    """Warn when more than :data:`LOST_SHARE` of a split's boxes cannot reach the network."""
    if not census.boxes or census.lost <= LOST_SHARE * census.boxes:
        return
    health.warn(CHECK, "%s: %d of its %d boxes (%.0f%%) cannot reach the network: %s; look at "
                "their coordinates in %s%s" % (
                    census.name, census.lost, census.boxes, 100.0 * census.lost / census.boxes,
                    census.lost_reasons(), census.source,
                    ", or train at a larger --data-shape" if census.tiny else ""))


def warn_missing_classes(health, train, val):
    """Warn, naming them with their validation counts, about classes the training split has
    no box of: the model cannot learn them and their AP stays 0."""
    missing = [name for name, count in zip(train.class_names, train.class_counts) if not count]
    if not missing:
        return
    in_val = dict(zip(val.class_names, val.class_counts)) if val is not None else {}
    names = ", ".join("%s (%s)" % (name, "%d in validation" % in_val.get(name, 0)
                                   if val is not None else "no validation split")
                      for name in missing)
    them = "them" if len(missing) > 1 else "it"
    health.warn(CHECK, "%s has no box of class%s %s: the model cannot learn a class it never "
                "sees, its AP stays 0; add training images of %s, or take %s out of the class "
                "list" % (train.name, "es" if len(missing) > 1 else "", names, them, them))


# -- the boxes against the anchors ----------------------------------------------------------

@dataclass(frozen=True)
class BoxSizes:
    """The training boxes as the network sees them, against its anchors. Sides in pixels of
    the input (``side``: its square side, or its short side) before augmentation, as the
    square root of each box's area; ``anchor`` the smallest anchor's side (its area's root)
    on its map of ``stride``; ``recall`` the share of boxes some anchor can match at IoU
    ``iou``, ``fitted_recall`` that of anchors fitted to them (None: not measured, fitted
    already, or the architecture's cannot be);
    ``photo_box`` the median box side and ``photo_side`` the median short side of the
    images, in their own pixels; ``stretched``: the input is a square ``side`` whatever the
    image (SSD's), else the images keep their aspect ratio; ``max_expand`` the zoom-out of
    the augmentation (1: none, or none for this resize); ``fitted``: the anchors are fitted
    already."""
    name: str
    input_size: str
    side: int
    boxes: int
    median: float
    p10: float
    anchor: float
    stride: float
    iou: float
    recall: float
    small: float                     # share of boxes below max(anchor * sqrt(iou), stride)
    photo_box: float
    photo_side: float
    stretched: bool
    max_expand: float
    fitted: bool = False
    fitted_recall: Optional[float] = None

    @property
    def matched_side(self):
        """The smallest square box the smallest anchor can match (IoU = area ratio)."""
        return self.anchor * np.sqrt(self.iou)

    @property
    def target(self):
        """The median box side a suggested input or tile aims at (:data:`TARGET_STRIDES`)."""
        return max(self.anchor, TARGET_STRIDES * self.stride)

    @property
    def too_small(self):
        return self.small > SMALL_SHARE

    @property
    def low_recall(self):
        return self.recall < LOW_RECALL

    def line(self):
        """``census: train ...: boxes at the 192x192 input: median side 59 px, ...``."""
        return ("census: train %s: boxes at the %s input: median side %s px, 10th percentile "
                "%s px; smallest anchor %s px on the stride-%s map%s; anchors can match %s of "
                "them at IoU %g (best possible recall)" % (
                    self.name, self.input_size, pixels(self.median), pixels(self.p10),
                    pixels(self.anchor), pixels(self.stride),
                    " (fitted by --fit-anchors)" if self.fitted else "",
                    percent(self.recall), self.iou))


def take_sizes(dataset, name, preprocessing, anchor_maps, max_expand, fitted=False):
    """The :class:`BoxSizes` of the training ``dataset`` at the input ``preprocessing``
    describes, against ``anchor_maps`` (a model's :meth:`~zoo.DetectionModel.anchor_maps`);
    None without a box or without anchors."""
    sides = box_sides(dataset, preprocessing)
    if anchor_maps is None or not len(sides):
        return None
    maps, iou = anchor_maps
    scales = np.sqrt(sides.prod(axis=1))
    level = min(maps, key=lambda m: min(w * h for w, h in m.shapes))
    # the zoom-out and the crop are SSD's: a short-side resize's augmentation has neither
    stretched = preprocessing.get("resize") != "short_side"
    anchor = float(np.sqrt(min(w * h for w, h in level.shapes)))
    table = box_table(dataset.records)
    photo = table.boxes[:, 2:] - table.boxes[:, :2]
    photo = np.sqrt(photo[(photo > 0).all(axis=1)].prod(axis=1))
    return BoxSizes(
        name=name, input_size=input_size(preprocessing), side=preprocessing["data_shape"][0],
        boxes=len(sides), median=float(np.median(scales)),
        p10=float(np.percentile(scales, 10)), anchor=anchor, stride=float(level.stride),
        iou=iou, recall=best_possible_recall(sides, maps, iou),
        small=float((scales < max(anchor * np.sqrt(iou), level.stride)).mean()),
        photo_box=float(np.median(photo)),
        photo_side=float(np.median([min(r.width, r.height) for r in dataset.records])),
        stretched=stretched, max_expand=max_expand if stretched else 1.0, fitted=fitted)


def needs_advice(sizes):
    """Whether :func:`report_sizes` warns about ``sizes`` (a :class:`BoxSizes` or None)."""
    return sizes is not None and (sizes.too_small or sizes.low_recall
                                  or expand_limit(sizes) is not None)


def report_sizes(health, sizes):
    """Warn in ``health`` when most boxes of ``sizes`` (a :class:`BoxSizes`) fall below the
    smallest anchor or its stride, or its anchors match under half of them, naming the flags
    that apply; else, when the zoom-out alone shrinks them below the smallest anchor, say to
    lower it. Returns the line to show."""
    limit = expand_limit(sizes)
    if sizes.too_small or sizes.low_recall:
        health.warn(CHECK, "%s; %s%s" % (
            size_finding(sizes), "; or ".join(size_fixes(sizes)),
            "; and zoom out less, --max-expand %g (%g shrinks boxes up to %gx more)"
            % (limit, sizes.max_expand, sizes.max_expand) if limit is not None else ""))
    elif limit is not None:
        health.warn(CHECK, "%s: the zoom-out augmentation (--max-expand %g) shrinks the boxes "
                    "%.1fx on average where it applies, the median box to %s px, below the "
                    "%s px the smallest anchor can match at IoU %g: lower it, --max-expand %g"
                    % (sizes.name, sizes.max_expand, zoom(sizes.max_expand),
                       pixels(sizes.median / zoom(sizes.max_expand)),
                       pixels(sizes.matched_side), sizes.iou, limit))
    return sizes.line()


def size_finding(sizes):
    """What is wrong with the boxes' sizes, measured."""
    if not sizes.too_small:
        return ("%s: its anchors can match only %s of the %d training boxes at IoU %g (best "
                "possible recall; boxes at the %s input: median side %s px, 10th percentile "
                "%s px)" % (sizes.name, percent(sizes.recall), sizes.boxes, sizes.iou,
                            sizes.input_size, pixels(sizes.median), pixels(sizes.p10)))
    return ("%s: %s of its training boxes are smaller than the smallest anchor (%s px, which "
            "matches boxes from %s px at IoU %g) or its map's stride (%s px) at the %s input "
            "(median side %s px, 10th percentile %s px): the anchors can match %s of them "
            "(best possible recall)" % (
                sizes.name, percent(sizes.small), pixels(sizes.anchor),
                pixels(sizes.matched_side), sizes.iou, pixels(sizes.stride), sizes.input_size,
                pixels(sizes.median), pixels(sizes.p10), percent(sizes.recall)))


def size_fixes(sizes):
    """The flags that would help, each with what it would give."""
    fixes = []
    tile = tile_size(sizes)
    if sizes.too_small and tile is not None:
        fixes.append("train on tiles, --tiles %d (the median box then %s px at the input)"
                     % (tile, pixels(sizes.photo_box * sizes.side / tile)))
    fit = " --fit-anchors" if sizes.fitted_recall is not None else ""
    shape = data_shape(sizes)
    if sizes.too_small and shape is not None:
        fixes.append("a larger input, --data-shape %d%s (the median box then %s px)"
                     % (shape, fit, pixels(sizes.median * shape / sizes.side)))
    if not sizes.fitted and sizes.fitted_recall is not None and \
            sizes.fitted_recall > sizes.recall:
        fixes.append("fit the anchors to the boxes, --fit-anchors (best possible recall then "
                     "%s)" % percent(sizes.fitted_recall))
    if fixes:
        return fixes
    if sizes.too_small:
        return ["the boxes are too small for this network at any input the census suggests: "
                "crop the images around them"]
    return ["give the anchors the boxes' shapes: the config's sizes and ratios, in a YAML "
            "config of your own (base: the network)"]


def data_shape(sizes):
    """The input side (a multiple of :data:`SIZE_STEP`) that brings the median box to the
    target (:attr:`BoxSizes.target`), at most :data:`LARGEST_SHAPE` and the images' own
    size; None where it would not grow, or the input keeps the images' aspect ratio (its
    long side bounded by ``max_size`` as well, a larger short side may not enlarge them)."""
    if not sizes.stretched:
        return None
    wanted = np.ceil(sizes.side * sizes.target / sizes.median / SIZE_STEP) * SIZE_STEP
    largest = min(LARGEST_SHAPE, max(SIZE_STEP, sizes.photo_side // SIZE_STEP * SIZE_STEP))
    shape = int(min(wanted, largest))
    return shape if shape > sizes.side else None


def tile_size(sizes):
    """The tile side, in the images' pixels (a multiple of :data:`SIZE_STEP`), whose resize
    to the input brings the median box to the target; None where a tile would not be
    smaller than the images."""
    tile = int(max(SIZE_STEP, sizes.photo_box * sizes.side / sizes.target
                   // SIZE_STEP * SIZE_STEP))
    return tile if tile < sizes.photo_side else None


def expand_limit(sizes):
    """The ``--max-expand`` under which the average zoom-out keeps the median box matchable
    by the smallest anchor (in steps of 0.5, at least 1), where the run's zooms out more;
    else None."""
    if sizes.max_expand <= 1:
        return None
    if sizes.median / zoom(sizes.max_expand) >= sizes.matched_side:
        return None
    limit = np.floor((2 * sizes.median / sizes.matched_side - 1) * 2) / 2
    return float(max(1.0, min(limit, sizes.max_expand)))


def zoom(max_expand):
    """The average zoom-out of ``--max-expand``: its ratio is drawn from [1, max_expand]."""
    return (1 + max_expand) / 2


def pixels(value):
    """``6.6`` under 10 pixels, else ``59``; ``8`` for a whole number."""
    text = "%.1f" % value if value < 10 else "%.0f" % value
    return text[:-2] if text.endswith(".0") else text


def percent(share):
    return "%.0f%%" % (100 * share)
