"""The record model every reader produces, its validation, and the skip-bad policy.

A record is one image with its ground truth in pixels: corner boxes
``(x1, y1, x2, y2)`` measured from the image's top-left corner (VOC's 1-based
coordinates are shifted by one, as GluonCV does). Readers build records with
:func:`make_record`, the one place boxes are checked, so every format rejects
the same faults.
"""
import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from zoo.errors import DataError

__all__ = ["BOX_TOLERANCE", "LABEL_WIDTH", "Record", "SkipPolicy", "check_image_size", "data_error",
           "make_record"]

LABEL_WIDTH = 6
"""Columns of a label row: ``[class_id, x1, y1, x2, y2, difficult]``."""

BOX_TOLERANCE = 1.0
"""Pixels a box may stick out of its image (annotation tools round outwards);
such boxes are clipped, anything further out is an error."""


def data_error(source, what, line=None):
    """A :class:`DataError` reading ``source[:line]: what`` on one line."""
    where = "%s:%d" % (source, line) if line is not None else str(source)
    return DataError(" ".join(("%s: %s" % (where, what)).split()))


@dataclass(frozen=True)
class Record:
    """One image's ground truth: boxes in pixels, class ids, difficult flags.

    ``path`` is the image file (None for images stored inside a record file);
    ``key`` is the format's own image id (VOC id, COCO image id, .lst index);
    ``orientation`` the EXIF orientation that turns the decoded pixels into the frame the
    annotation was drawn in (1: as stored; see :mod:`zoo.data.orientation`).
    """

    path: Optional[str]
    width: int
    height: int
    boxes: np.ndarray
    class_ids: np.ndarray
    difficult: np.ndarray
    key: Any = None
    orientation: int = 1

    def label(self):
        """The (M, 6) float32 label ``[class_id, x1, y1, x2, y2, difficult]`` in pixels."""
        return np.column_stack([self.class_ids, self.boxes, self.difficult]).astype(
            np.float32).reshape(-1, LABEL_WIDTH)


def make_record(source, path, width, height, boxes, class_ids, difficult, key=None,
                corner_names=None):
    """Check an image's annotations and return its :class:`Record`.

    ``source`` names the annotation (file, or ``file:line``) in error messages.
    Raises :class:`DataError` on a non-positive image size, a box with
    x2 <= x1 or y2 <= y1, or a box more than ``BOX_TOLERANCE`` pixels outside
    the image; boxes within the tolerance are clipped. ``corner_names``: what the format
    calls x2 and y2 (VOC's ``("xmax", "ymax")``), for a format that writes corners: an
    empty or inverted box that would fit its image read as x, y, width, height then says
    so.
    """
    if not (math.isfinite(width) and math.isfinite(height)):
        # 1e999 in an XML or JSON file reads as infinity, which no image measures.
        raise data_error(source, "image size %sx%s is not a finite number of pixels"
                         % (width, height))
    if not (width > 0 and height > 0):
        raise data_error(source, "image size %sx%s is not positive" % (width, height))
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    for index, (x1, y1, x2, y2) in enumerate(boxes):
        problem = box_problem(x1, y1, x2, y2, width, height)
        if problem and corner_names and looks_like_sizes(x1, y1, x2, y2, width, height):
            problem += ("; %s and %s look like a width and a height: write the corners "
                        "%s = xmin + width, %s = ymin + height" % (corner_names * 2))
        if problem:
            raise data_error(source, "object %d: box (%g, %g, %g, %g) %s"
                             % (index, x1, y1, x2, y2, problem))
    clipped = np.clip(boxes, 0, [width, height, width, height]).astype(np.float32)
    return Record(path=path, width=int(width), height=int(height), boxes=clipped,
                  class_ids=np.asarray(class_ids, dtype=np.int32).reshape(-1),
                  difficult=np.asarray(difficult, dtype=bool).reshape(-1), key=key)


def box_problem(x1, y1, x2, y2, width, height):
    """Why a pixel box is invalid in a ``width`` x ``height`` image, or None if it is fine."""
    if not np.all(np.isfinite([x1, y1, x2, y2])):
        return "has a non-finite coordinate"
    if x2 <= x1 or y2 <= y1:
        return "is empty or inverted (need x2 > x1 and y2 > y1)"
    if (x1 < -BOX_TOLERANCE or y1 < -BOX_TOLERANCE or x2 > width + BOX_TOLERANCE
            or y2 > height + BOX_TOLERANCE):
        return "lies outside the %dx%d image" % (width, height)
    return None


def looks_like_sizes(x1, y1, x2, y2, width, height):
    """Whether an empty or inverted box would fit its ``width`` x ``height`` image read as
    ``(x, y, w, h)``: the mistake of writing a width and a height where corners belong."""
    if not (x2 <= x1 or y2 <= y1):
        return False
    return (x2 >= 0 and y2 >= 0 and x1 + x2 <= width + BOX_TOLERANCE
            and y1 + y2 <= height + BOX_TOLERANCE)


class SkipPolicy:
    """What a reader does with bad records: raise the first, or drop them all and warn once.

    Strict mode re-raises the first :class:`DataError`. With ``skip_bad`` every
    bad record is dropped and :meth:`finish` emits one warning naming
    ``source`` with the number dropped and the first reason. A bad object
    drops its whole image: keeping the image without it would teach the model
    that the object is background.
    """

    def __init__(self, skip_bad, source):
        self.skip_bad, self.source, self.reasons = skip_bad, source, []

    def reject(self, error):
        """Handle one bad record's :class:`DataError`."""
        if not self.skip_bad:
            error.skippable = True  # the command line's error names --skip-bad
            raise error
        self.reasons.append(str(error))

    def parse_each(self, items, parse):
        """``[parse(item) for item in items]`` without the items whose parse raised DataError."""
        records = []
        for item in items:
            try:
                records.append(parse(item))
            except DataError as err:
                self.reject(err)
        return records

    def finish(self, records):
        """Warn once about skipped records; :class:`DataError` if no image is left."""
        if self.reasons:
            count = len(self.reasons)
            warnings.warn("%s: skipped %d bad record%s; first: %s"
                          % (self.source, count, "" if count == 1 else "s", self.reasons[0]),
                          stacklevel=3)
        if not records:
            raise data_error(self.source, "no usable images")
        return records


def check_image_size(width, height, record, source):
    """Raise :class:`DataError` if an image is not the size its annotation states,
    since the boxes were drawn on an image of that size."""
    if (width, height) != (record.width, record.height):
        raise data_error(source, "image is %dx%d but its annotation says %dx%d"
                         % (width, height, record.width, record.height))
