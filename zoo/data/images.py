"""Reading and checking image files: truncation is an error, never a grey image.

OpenCV decodes a truncated JPEG into a partly grey picture with only a warning
on stderr, so the bytes are checked for the format's end marker first.
"""
import io
import os

import cv2
import numpy as np
from PIL import Image

from .records import data_error

JPEG_START, JPEG_END = b"\xff\xd8", b"\xff\xd9"
PNG_START, PNG_END = b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82"
TAIL_BYTES = 1024
"""How far from the end the end marker may sit: some cameras append padding."""

DECODE_FLAGS = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
"""Stored pixel order, as annotation sizes and PIL's header size describe it."""


def completeness_problem(head, tail):
    """Why an image whose first and last bytes are ``head``/``tail`` is incomplete, or None."""
    if not head:
        return "empty image file"
    if head.startswith(JPEG_START) and JPEG_END not in tail:
        return "truncated JPEG (no end marker FFD9)"
    if head.startswith(PNG_START) and not tail.endswith(PNG_END):
        return "truncated PNG (no IEND chunk)"
    return None


def check_image_file(path):
    """Raise :class:`DataError` unless ``path`` is a readable, complete image file.

    Reads only the first and last bytes, so it is cheap enough to run over a
    whole dataset when it is opened.
    """
    try:
        with open(path, "rb") as stream:
            head = stream.read(len(PNG_START))
            stream.seek(max(0, os.fstat(stream.fileno()).st_size - TAIL_BYTES))
            tail = stream.read()
    except OSError as err:
        raise unreadable(path, err)
    check_complete(head + tail, path)


def check_complete(data, source):
    """Raise :class:`DataError` if image bytes are empty or truncated."""
    problem = completeness_problem(data[:len(PNG_START)], data[-TAIL_BYTES:])
    if problem:
        raise data_error(source, problem)


def read_image_bytes(path):
    """The bytes of a complete image file; :class:`DataError` if missing or truncated."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as err:
        raise unreadable(path, err)
    check_complete(data, path)
    return data


def unreadable(path, err):
    """The :class:`DataError` for an image file the system cannot read."""
    return data_error(path, "cannot read image: %s" % (err.strerror or err))


def decode_image(data, source):
    """Decode complete image bytes to an HxWx3 uint8 RGB array; ``source`` names them in errors."""
    check_complete(data, source)
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), DECODE_FLAGS)
    if image is None:
        raise data_error(source, "not a decodable image")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def read_image(path):
    """Read and decode an image file to an HxWx3 uint8 RGB array."""
    return decode_image(read_image_bytes(path), path)


def image_size(data, source):
    """``(width, height)`` from an image's header without decoding its pixels."""
    try:
        with Image.open(io.BytesIO(data) if isinstance(data, bytes) else data) as image:
            return image.size
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        raise data_error(source, "not a readable image: %s" % err)
