"""Before training: the data census.

What each split holds, in one line each: images against distinct image files, boxes per
image, the class histogram, and the boxes lost on the way to the network (empty once
clipped to their image, or under a pixel at the model's input). Warned: a list whose
entries are mostly one file, a class without a training instance, many lost boxes.

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
from zoo.schema.preprocessing import input_size, scaled_size

__all__ = ["CHECK", "Census", "check_boxes_in_pixels", "check_has_boxes", "check_skipped",
           "report", "take_census"]

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
