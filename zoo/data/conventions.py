"""Box conventions: what a dataset's corner coordinates ``(x1, y1, x2, y2)`` mean.

Every dataset has a ``box_convention`` and every metric measures its boxes by it:

``"inclusive"``
    ``x2, y2`` are the last pixel inside the box, so a box is ``x2 - x1 + 1`` pixels
    wide. Pascal VOC XML (1-based in the file, shifted to 0-based in records) and
    the embedded shapes dataset, which is a VOC folder.
``"continuous"``
    ``x2, y2`` are the right and bottom edges, one past the last pixel, so a box is
    ``x2 - x1`` wide. COCO ``[x, y, w, h]`` boxes (corners ``x + w``, ``y + h``).
``.lst`` / ``.rec``
    The convention of the dataset they were packed from, written beside them in
    ``PREFIX.box_convention.txt`` (one word) by ``zoo prepare-data``. The im2rec
    label itself has no place for it: other tools give extra header values other
    meanings (GluonCV's examples put the image size there). Without that file a pack
    is read as continuous, the im2rec format's own reading (a whole-image box is
    ``[0, 0, 1, 1]``); write the file to say otherwise.
"""
import os

from zoo.data.records import data_error

__all__ = ["check_box_convention", "pixel_offset", "read_box_convention", "write_box_convention"]

INCLUSIVE, CONTINUOUS = "inclusive", "continuous"
PIXEL_OFFSETS = {INCLUSIVE: 1, CONTINUOUS: 0}
"""What a convention adds to ``x2 - x1`` (and ``y2 - y1``) to get a box's size in pixels."""


def check_box_convention(convention):
    """``convention`` if it is one of :data:`PIXEL_OFFSETS`, else ValueError."""
    if convention not in PIXEL_OFFSETS:
        raise ValueError("box convention %r: expected one of %s"
                         % (convention, ", ".join(PIXEL_OFFSETS)))
    return convention


def pixel_offset(convention):
    """1 for inclusive corners, 0 for continuous ones: ``symbols.boxes.iou``'s ``offset``."""
    return PIXEL_OFFSETS[check_box_convention(convention)]


def convention_file(prefix):
    """The file naming the box convention of ``PREFIX.lst`` / ``PREFIX.rec``."""
    return prefix + ".box_convention.txt"


def read_box_convention(path):
    """The box convention of the ``.lst`` or ``.rec`` file ``path``: the word in the file
    beside it, continuous when there is none; :class:`DataError` if the word is unknown."""
    beside = convention_file(os.path.splitext(path)[0])
    if not os.path.isfile(beside):
        return CONTINUOUS
    try:
        with open(beside, encoding="utf-8") as stream:
            word = stream.read().strip()
    except (OSError, UnicodeDecodeError) as err:
        raise data_error(beside, "cannot read the box convention: %s" % err)
    if word not in PIXEL_OFFSETS:
        raise data_error(beside, "box convention %r: expected one of %s"
                         % (word[:40], ", ".join(PIXEL_OFFSETS)))
    return word


def write_box_convention(prefix, convention):
    """Write ``convention`` beside ``PREFIX.lst`` / ``PREFIX.rec``, as
    :func:`read_box_convention` reads it."""
    with open(convention_file(prefix), "w", encoding="utf-8") as stream:
        stream.write(check_box_convention(convention) + "\n")
