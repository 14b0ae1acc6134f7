"""EXIF orientation: the frame a viewer shows a photo in, read from the file's header.

A camera stores a portrait photo as landscape pixels with an EXIF ``Orientation`` tag
(1-8) telling viewers how to turn it; decoders here give the stored pixels
(:data:`zoo.data.images.DECODE_FLAGS`). :func:`exif_orientation` reads the tag from the
header bytes alone (a JPEG's APP1 segment, walked as :func:`zoo.data.images.jpeg_header`
walks to the frame header; Pillow's header parser for other formats), so knowing it costs
no decoding, and :func:`orient` turns decoded pixels into the displayed frame.

For datasets the annotation decides (:class:`FramePolicy`): boxes drawn on the displayed
picture have its size, boxes drawn on the stored pixels the stored size. Where both sizes
are equal (a square photo, a 180-degree turn or a mirror) the file cannot tell which was
meant: the stored frame is kept and one warning counts such images.
"""
import io
import struct
import warnings

import numpy as np
from PIL import Image

from zoo.data.records import check_image_size
from zoo.data.images import (HEAD_BYTES, JPEG_FRAME_MARKERS, JPEG_START, JPEG_STANDALONE_MARKERS,
                     check_image_file, decode_image, decode_reduced, image_size,
                     read_image_bytes)

__all__ = ["EXIF_CHOICES", "FramePolicy", "check_exif_choice", "displayed_size",
           "exif_orientation", "file_orientation", "orient", "read_in_frame", "read_reduced"]

EXIF_CHOICES = ("apply", "ignore")
"""``apply``: turn photos as their EXIF orientation says (what a viewer shows); ``ignore``:
keep the stored pixels."""
ORIENTATION_TAG = 0x0112
EXIF_HEADER = b"Exif\x00\x00"
APP1 = 0xE1
TRANSPOSED = frozenset((5, 6, 7, 8))
"""Orientations whose displayed frame swaps width and height."""


def exif_orientation(data):
    """The EXIF orientation (1-8; 1 when there is none or it is unreadable) of image bytes
    that begin at the file's start; None if a JPEG's bytes end before its EXIF segment
    does, so that more of the file is needed."""
    if data.startswith(JPEG_START):
        return jpeg_orientation(data)
    try:
        with Image.open(io.BytesIO(data)) as image:
            return header_orientation(image)
    except Exception:  # noqa: BLE001 - a header Pillow cannot parse shows unturned
        return 1


def header_orientation(image):
    """The orientation of an image Pillow has opened but not decoded: from the EXIF block
    its header holds (PNG eXIf before the pixels, WebP EXIF), or a TIFF's own tag.
    (``getexif`` is not used: for a PNG it decodes the pixels to look further.)"""
    exif = image.info.get("exif")
    if isinstance(exif, bytes):
        return tiff_orientation(exif[len(EXIF_HEADER):] if exif.startswith(EXIF_HEADER)
                                else exif)
    tags = getattr(image, "tag_v2", None)
    return valid_orientation(tags.get(ORIENTATION_TAG, 1)) if tags is not None else 1


def jpeg_orientation(data):
    """The orientation in a JPEG's APP1 EXIF segment, walking the segments before the
    frame header; None if the bytes end first."""
    position = len(JPEG_START)
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return 1  # not a marker: a damaged header, which decoding reports
        marker = data[position + 1]
        if marker == 0xFF:  # a fill byte before the marker
            position += 1
            continue
        if marker in JPEG_STANDALONE_MARKERS:  # no length field
            position += 2
            continue
        if marker in JPEG_FRAME_MARKERS or marker in (0xDA, 0xD9):
            return 1  # EXIF comes before the frame header
        end = position + 2 + struct.unpack(">H", data[position + 2:position + 4])[0]
        if marker == APP1 and data[position + 4:position + 10] == EXIF_HEADER:
            return None if end > len(data) else tiff_orientation(data[position + 10:end])
        position = end
    return None


def tiff_orientation(tiff):
    """The ``Orientation`` entry of a TIFF structure's first directory (EXIF's IFD0)."""
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return 1
    directory = struct.unpack(order + "I", tiff[4:8])[0]
    if directory + 2 > len(tiff):
        return 1
    count = struct.unpack(order + "H", tiff[directory:directory + 2])[0]
    for entry in range(directory + 2, min(directory + 2 + 12 * count, len(tiff) - 11), 12):
        tag, kind = struct.unpack(order + "HH", tiff[entry:entry + 4])
        if tag == ORIENTATION_TAG and kind == 3:  # SHORT
            return valid_orientation(struct.unpack(order + "H", tiff[entry + 8:entry + 10])[0])
    return 1


def valid_orientation(value):
    """``value`` if it is an orientation (1-8), else 1: viewers show other values unturned."""
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def file_orientation(path):
    """The EXIF orientation of an image file, from its first :data:`HEAD_BYTES` (the whole
    file only when its EXIF segment is longer)."""
    try:
        with open(path, "rb") as stream:
            found = exif_orientation(stream.read(HEAD_BYTES))
            if found is None:
                stream.seek(0)
                found = exif_orientation(stream.read())
    except OSError:
        return 1  # reading the pixels reports the file
    return found or 1


def orient(image, orientation):
    """An HxWx3 image turned from its stored frame into the one EXIF ``orientation`` shows
    (a view where possible; C-contiguous, as OpenCV needs)."""
    turned = {1: lambda a: a, 2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1],
              4: lambda a: a[::-1], 5: lambda a: a.transpose(1, 0, 2),
              6: lambda a: np.rot90(a, -1), 7: lambda a: np.rot90(a[::-1], 1),
              8: lambda a: np.rot90(a, 1)}[orientation](image)
    return turned if turned is image else np.ascontiguousarray(turned)


def displayed_size(width, height, orientation):
    """``(width, height)`` of a stored ``width`` x ``height`` image as a viewer shows it."""
    return (height, width) if orientation in TRANSPOSED else (width, height)


def read_in_frame(path, exif="apply", data=None):
    """Read and decode an image file to HxWx3 uint8 RGB, turned as its EXIF orientation
    says when ``exif`` is ``"apply"``, as stored when ``"ignore"``. The orientation comes
    from the bytes already read: no second decode. ``data``: the file's bytes, received
    already (an HTTP upload), ``path`` only naming them in errors."""
    data = read_image_bytes(path, data)
    image = decode_image(data, path)
    return orient(image, exif_orientation(data) or 1) if exif == "apply" else image


def read_reduced(path, exif, resized, data=None):
    """``(image, factor, size)``: an image file read as :func:`read_in_frame` reads it, but
    decoded at 1/``factor`` of its size where it is a JPEG large enough
    (:func:`zoo.data.images.decode_reduced`), and ``size`` the ``(width, height)`` of the
    whole photo in the same frame. ``resized(width, height)``: the ``(width, height)`` an
    image of the displayed size is resized to, which the decoded one must still reach.
    ``data`` as :func:`read_in_frame` takes it."""
    data = read_image_bytes(path, data)
    orientation = (exif_orientation(data) or 1) if exif == "apply" else 1
    size = displayed_size(*image_size(data, path), orientation)
    # Turning back from the displayed frame to the stored one is the same swap.
    needed = displayed_size(*resized(*size), orientation)
    image, factor = decode_reduced(data, path, needed)
    return orient(image, orientation), factor, size


def check_exif_choice(exif):
    """ValueError unless ``exif`` is one of :data:`EXIF_CHOICES`."""
    if exif not in EXIF_CHOICES:
        raise ValueError("exif=%r: expected one of %s" % (exif, ", ".join(EXIF_CHOICES)))
    return exif


class FramePolicy:
    """A dataset reader's choice, per image, of the frame its annotation was drawn in.

    :meth:`frame` checks an image file's header size against the annotation's and gives
    the orientation to apply when decoding (1: the stored frame); :meth:`finish` warns
    once with the number of images whose frame could not be told.
    """

    def __init__(self, source):
        self.source, self.undecided = source, 0

    def frame(self, path, record):
        """The orientation to apply to ``path`` for ``record``; :class:`DataError` if its
        size is neither the annotation's stored nor displayed size."""
        stored = tuple(check_image_file(path)[1:])
        orientation = file_orientation(path)
        displayed = displayed_size(*stored, orientation)
        annotated = (record.width, record.height)
        if orientation == 1 or annotated != displayed:
            check_image_size(*stored, record, path)  # raises unless stored
            return 1
        if annotated == stored:  # both frames fit the annotation
            self.undecided += 1
            return 1
        return orientation

    def finish(self):
        """Warn once if some images' frame could not be told from their annotation."""
        if self.undecided:
            warnings.warn("%s: %d image%s with an EXIF orientation whose stored and displayed "
                          "sizes are equal (square, or turned 180 degrees or mirrored): read "
                          "as stored, since the annotation cannot tell which frame its boxes "
                          "were drawn in" % (self.source, self.undecided,
                                             "" if self.undecided == 1 else "s"),
                          stacklevel=3)
