"""Reading and checking image files: a damaged image is a :class:`DataError`, never a grey one.

OpenCV decodes a truncated or corrupt JPEG into a partly grey picture with
only libjpeg's warning on stderr ("Corrupt JPEG data", "Premature end of JPEG
file"), even when an end marker was appended to the cut-short data. JPEGs are
therefore decoded by libjpeg-turbo through ``simplejpeg`` in strict mode,
which turns every such warning into an error (and is twice as fast as
``cv2.imdecode`` plus the colour conversion, with identical pixels); GIFs (their first
frame) go through PIL, other formats through OpenCV. Before any decoding, the dimensions are
read from the header (JPEG SOFn, PNG IHDR) and checked against a pixel-count limit, so a
header claiming 40000x40000 pixels costs nothing.
"""
import io
import os
import struct
from collections import namedtuple

import cv2
import numpy as np
import simplejpeg
from PIL import Image

from zoo.errors import DataError
from zoo.data.records import data_error
from zoo.process import variable

__all__ = ["DCT_FACTORS", "HEAD_BYTES", "JPEG_FRAME_MARKERS", "JPEG_STANDALONE_MARKERS",
           "check_image_file", "dct_factor", "decode_image", "decode_reduced", "header",
           "image_size", "read_image", "read_image_bytes", "unreadable"]

JPEG_START, JPEG_END = b"\xff\xd8", b"\xff\xd9"
PNG_START, PNG_END = b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82"
TAIL_BYTES = 1024
"""How far from the end the end marker may sit: some cameras append padding."""
HEAD_BYTES = 4096
"""Bytes read for a header; a file whose header is longer (EXIF thumbnails, ICC profiles)
is read whole."""

MAX_PIXELS = 100_000_000
"""Default limit on width x height, checked from the header before decoding."""
MAX_PIXELS_VARIABLE = "ZOO_MAX_PIXELS"
"""Environment variable that overrides :data:`MAX_PIXELS`."""

DECODE_FLAGS = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
"""Stored pixel order, as annotation sizes and the header describe it (simplejpeg, too,
ignores EXIF orientation)."""

JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""SOF0-SOF15: the segments that state the image's size (DHT, JPG and DAC are not)."""
JPEG_STANDALONE_MARKERS = frozenset(range(0xD0, 0xD8)) | {0x01}
"""Markers without a length field (RSTn, TEM)."""

Header = namedtuple("Header", "format width height")


def max_pixels(limit=None):
    """The pixel-count limit in force: ``limit`` if given, else ``$ZOO_MAX_PIXELS``, else
    :data:`MAX_PIXELS`."""
    if limit is not None:
        return limit
    value = variable(MAX_PIXELS_VARIABLE)
    return MAX_PIXELS if value is None else int(value)


def completeness_problem(head, tail):
    """Why an image whose first and last bytes are ``head``/``tail`` is incomplete, or None."""
    if not head:
        return "empty image file"
    if head.startswith(JPEG_START) and JPEG_END not in tail:
        return "truncated JPEG (no end marker FFD9)"
    if head.startswith(PNG_START) and not tail.endswith(PNG_END):
        return "truncated PNG (no IEND chunk)"
    return None


def check_complete(data, source):
    """Raise :class:`DataError` if image bytes are empty or truncated."""
    problem = completeness_problem(data[:len(PNG_START)], data[-TAIL_BYTES:])
    if problem:
        raise data_error(source, problem)


def header(data, source, limit=None):
    """The :class:`Header` of image bytes (the whole file, or at least its first
    :data:`HEAD_BYTES`); :class:`DataError` if there is none or the image has more
    pixels than the limit (:func:`max_pixels`)."""
    if data.startswith(JPEG_START):
        found = jpeg_header(data, source)
    elif data.startswith(PNG_START):
        found = png_header(data, source)
    else:
        found = pil_header(data, source)
    check_pixel_count(found, source, limit)
    return found


def jpeg_header(data, source):
    """Width and height from a JPEG's frame header (SOFn), walking the segments before it."""
    position = len(JPEG_START)
    while position < len(data) and data[position] == 0xFF:
        while position < len(data) and data[position] == 0xFF:  # fill bytes before a marker
            position += 1
        marker = data[position] if position < len(data) else None
        if marker in JPEG_STANDALONE_MARKERS:
            position += 1
            continue
        if marker in (0xDA, 0xD9):  # scan data, or the end, before any frame header
            raise data_error(source, "JPEG has no frame header (SOF) before its scan data")
        if position + 3 > len(data):
            break
        if marker in JPEG_FRAME_MARKERS and position + 8 <= len(data):
            height, width = struct.unpack(">HH", data[position + 4:position + 8])
            return Header("JPEG", width, height)
        position += 1 + struct.unpack(">H", data[position + 1:position + 3])[0]
    raise data_error(source, "JPEG header is damaged or cut short before its frame header "
                             "(SOF, byte %d)" % position)


def png_header(data, source):
    """Width and height from a PNG's IHDR chunk."""
    if data[len(PNG_START) + 4:len(PNG_START) + 8] != b"IHDR" or len(data) < 24:
        raise data_error(source, "PNG does not start with an IHDR chunk")
    width, height = struct.unpack(">II", data[16:24])
    return Header("PNG", width, height)


def pil_header(data, source):
    """Format and size of another format, from PIL's header parsers (no pixels decoded)."""
    if not data:
        raise data_error(source, "empty image file")
    try:
        with Image.open(io.BytesIO(data)) as image:
            return Header(image.format, *image.size)
    except Image.UnidentifiedImageError:
        raise data_error(source, "not an image file (unknown format)")
    except Image.DecompressionBombError as err:
        raise data_error(source, "image too large: %s" % err)
    except (OSError, ValueError, SyntaxError, struct.error) as err:
        raise data_error(source, "not a readable image: %s" % err)


def check_pixel_count(found, source, limit=None):
    """Raise :class:`DataError` if a header's size is empty or over the pixel limit."""
    if found.width < 1 or found.height < 1:
        raise data_error(source, "%s header gives an empty size %dx%d"
                         % (found.format, found.width, found.height))
    limit = max_pixels(limit)
    if found.width * found.height > limit:
        raise data_error(source, "%s header gives %dx%d = %d pixels, over the limit of %d "
                         "(set %s to raise it)" % (found.format, found.width, found.height,
                                                    found.width * found.height, limit,
                                                    MAX_PIXELS_VARIABLE))


def read_file(path):
    """The bytes of a file; :class:`DataError` if the system cannot read it."""
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError as err:
        raise unreadable(path, err)


def unreadable(path, err):
    """The :class:`DataError` for an image file the system cannot read."""
    return data_error(path, "cannot read image: %s" % (err.strerror or err))


def check_image_file(path, limit=None):
    """The :class:`Header` of an image file, which must be readable, complete, of a known
    format and within the pixel limit; :class:`DataError` otherwise.

    Reads only the header and the last bytes (cheap enough to run over a whole dataset
    when it is opened); the pixels are checked when decoded.
    """
    try:
        with open(path, "rb") as stream:
            head = stream.read(HEAD_BYTES)
            stream.seek(max(0, os.fstat(stream.fileno()).st_size - TAIL_BYTES))
            tail = stream.read()
    except OSError as err:
        raise unreadable(path, err)
    problem = completeness_problem(head[:len(PNG_START)], tail)
    if problem:
        raise data_error(path, problem)
    try:
        return header(head, path, limit)
    except DataError:
        if len(head) < HEAD_BYTES:  # that was the whole file
            raise
        return header(read_file(path), path, limit)  # a header longer than HEAD_BYTES


def read_image_bytes(path, data=None):
    """The bytes of a complete image file; :class:`DataError` if missing or truncated.
    ``data``: the file's bytes, received already (an HTTP upload), only checked, ``path``
    naming them."""
    data = read_file(path) if data is None else data
    check_complete(data, path)
    return data


def decode_image(data, source, limit=None):
    """Decode complete image bytes to an HxWx3 uint8 RGB array; ``source`` names them in
    errors. Any damage libjpeg notices is a :class:`DataError`, as is a header over the
    pixel limit (checked before decoding)."""
    check_complete(data, source)
    found = header(data, source, limit)
    if found.format == "JPEG":
        try:
            return simplejpeg.decode_jpeg(data, colorspace="RGB", strict=True)
        except ValueError as err:
            raise data_error(source, "corrupt JPEG: %s" % err)
    if found.format == "GIF":
        return gif_frame(data, source)
    try:
        image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), DECODE_FLAGS)
    except cv2.error as err:
        raise data_error(source, "not a decodable image: %s" % str(err).strip().splitlines()[-1])
    if image is None:
        raise data_error(source, "not a decodable image")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


DCT_FACTORS = (8, 4, 2)
"""The reductions libjpeg decodes a JPEG at directly (its DCT scaling), largest first: each
output pixel stands for a whole ``factor`` x ``factor`` block of the photo's, so results map
back exactly, and the 1/2, 1/4 and 1/8 scales are the fast ones (libjpeg-turbo's others, such
as 3/8, cost nearly a full decode)."""


def dct_factor(width, height, needed):
    """The largest of :data:`DCT_FACTORS` at which a ``width`` x ``height`` JPEG, decoded,
    still has at least the ``needed`` ``(width, height)`` pixels on each side; 1 if none."""
    for factor in DCT_FACTORS:
        if width >= needed[0] * factor and height >= needed[1] * factor:
            return factor
    return 1


def decode_reduced(data, source, needed, limit=None):
    """``(image, factor)``: complete image bytes decoded to an HxWx3 uint8 RGB array at
    1/``factor`` of their stored size, a JPEG at the :func:`dct_factor` that keeps at least
    ``needed`` ``(width, height)`` pixels (libjpeg's DCT scaling: a 4000x3000 photo needed at
    1000x750 decodes as 1000x750, in a quarter of the time and a sixteenth of the memory);
    any other format, or a JPEG not large enough, at full size (factor 1). Errors as
    :func:`decode_image`'s: a corrupt JPEG is refused at every scale."""
    check_complete(data, source)
    found = header(data, source, limit)
    factor = (dct_factor(found.width, found.height, needed) if found.format == "JPEG"
              else 1)
    if factor == 1:
        return decode_image(data, source, limit), 1
    # The least size at the factor itself, and no smaller factor than it: simplejpeg picks
    # the scale that gives the smallest output not under these, which is exactly 1/factor.
    width, height = -(-found.width // factor), -(-found.height // factor)
    try:
        image = simplejpeg.decode_jpeg(data, colorspace="RGB", strict=True, min_width=width,
                                       min_height=height, min_factor=factor)
    except ValueError as err:
        raise data_error(source, "corrupt JPEG: %s" % err)
    if image.shape[:2] != (height, width):  # a scale libjpeg did not offer: decode it whole
        return decode_image(data, source, limit), 1
    return image, factor


def gif_frame(data, source):
    """The first frame of a GIF (an animation's too) as HxWx3 uint8 RGB: OpenCV reads none."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.seek(0)
            return np.asarray(image.convert("RGB"))
    except (OSError, ValueError, SyntaxError, EOFError) as err:
        raise data_error(source, "corrupt GIF: %s" % err)


def read_image(path, limit=None):
    """Read and decode an image file to an HxWx3 uint8 RGB array."""
    return decode_image(read_image_bytes(path), path, limit)


def image_size(data, source, limit=None):
    """``(width, height)`` from image bytes' header, without decoding."""
    return tuple(header(data, source, limit)[1:])
