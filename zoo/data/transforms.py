"""Training augmentation and the validation transforms, of both resize modes
(:mod:`zoo.schema.preprocessing`).

A transform takes ``(image, label, rng)``: an HxWx3 uint8 RGB image, an (M, 6)
label ``[class_id, x1, y1, x2, y2, difficult]`` in pixels and a
``numpy.random.RandomState`` that supplies every random choice. It returns a
(3, h, w) float32 array normalised by the mean and std pixels, and the label
with boxes normalised to [0, 1] of that output. The stretching transforms (SSD's)
give S x S; the short-side ones (Faster R-CNN's) keep the aspect ratio and also
return the scale they applied, ``(data, label, scale)``: their ``size_divisor``
tells :class:`zoo.data.DetectionLoader` to pad each batch onto one canvas
(:func:`pad_batch`). :func:`inference_transform` builds the transform of a
preprocessing dict.
The validation transforms resize by the dict's ``interpolation`` (a warp, or OpenCV's
resize: :data:`zoo.schema.preprocessing.INTERPOLATIONS`); the training ones always warp.

Expansion, the IoU-constrained crop, the flip and the resize are one affine
map from the source image to the output, applied by a single ``warpAffine``
whose border is the mean pixel: the zoomed-out canvas (up to 16 times the
image's area) is never built. Colour jitter runs on the output image, where it
touches the fewest pixels; its steps that act on each value alone are a single
lookup of the uint8 value in a 256-entry table.
"""
import threading

import cv2
import numpy as np

from symbols.boxes import iou
from zoo.schema.preprocessing import (INTERPOLATIONS, MEAN_PIXELS, STD_PIXELS, WARP, canvas_size,
                             interpolation_of, scaled_size)

__all__ = ["MEAN_PIXELS", "MIN_IOUS", "NO_LABEL", "STD_PIXELS", "ShortSideTrainTransform",
           "ShortSideValTransform", "TrainTransform", "ValTransform", "centres_inside",
           "inference_transform", "jitter_colour", "normalise", "pad_batch", "resize_image",
           "sample_crop", "scratch", "train_transform"]

MIN_IOUS = (None, 0.1, 0.3, 0.5, 0.7, 0.9)
"""SSD's crop constraints: None keeps the whole image, a number needs a box with that IoU."""

CROP_TRIALS = 50
CROP_MIN_SCALE = 0.3
CROP_MAX_ASPECT = 2.0
APPLY_PROBABILITY = 0.5
"""Probability of each colour step, of expansion and of the flip."""
NO_LABEL = np.zeros((0, 6), np.float32)
"""The label of an image transformed for inference."""


class ValTransform:
    """Resize to ``data_shape`` x ``data_shape`` by ``interpolation``
    (:data:`zoo.schema.preprocessing.INTERPOLATIONS`) and normalise; no randomness."""

    size_divisor = None
    """Outputs are all S x S: a batch needs no canvas."""

    def __init__(self, data_shape, mean_pixels=MEAN_PIXELS, std_pixels=STD_PIXELS,
                 interpolation=WARP):
        if interpolation not in INTERPOLATIONS:
            raise ValueError("preprocessing interpolation = %r: expected one of %s"
                             % (interpolation, ", ".join(INTERPOLATIONS)))
        self.data_shape = int(data_shape)
        self.mean_pixels = np.asarray(mean_pixels, dtype=np.float32)
        self.std_pixels = np.asarray(std_pixels, dtype=np.float32)
        self.interpolation = interpolation

    def __call__(self, image, label, rng=None):
        height, width = image.shape[:2]
        affine = window_affine((0, 0, width, height), (0, 0), (self.data_shape,) * 2,
                               flip=False)
        return self.render(image, as_label(label), affine, (self.data_shape,) * 2)

    def render(self, image, label, affine, size, colour_rng=None):
        """The ``size`` ``(height, width)`` output of an image and its pixel label under an
        affine map, with colour jitter drawn from ``colour_rng`` when one is given."""
        shape = tuple(size) + (3,)
        warped = scratch("warped", shape, np.uint8)
        if self.interpolation == WARP:
            warped = warp_image(image, affine, size, self.mean_pixels, out=warped)
        else:  # only validation transforms resize otherwise, and their map is the whole image
            warped = resize_image(image, size, self.interpolation, out=warped)
        pixels = scratch("pixels", shape, np.float32)
        if colour_rng is None:
            np.copyto(pixels, warped)
        else:
            pixels = jitter_colour(warped, colour_rng, out=pixels)
        label = mapped_label(label, affine, size)
        return normalise(pixels, self.mean_pixels, self.std_pixels), label


class TrainTransform(ValTransform):
    """SSD augmentation: colour jitter, expansion, IoU-constrained crop, flip, resize.

    ``max_expand`` is the largest zoom-out ratio (1 disables expansion);
    ``min_ious`` are the crop constraints to choose from (``(None,)`` disables
    cropping).
    """

    def __init__(self, data_shape, mean_pixels=MEAN_PIXELS, std_pixels=STD_PIXELS,
                 max_expand=4.0, min_ious=MIN_IOUS, flip=True, colour=True):
        super().__init__(data_shape, mean_pixels, std_pixels)
        self.max_expand, self.min_ious = max_expand, tuple(min_ious)
        self.flip, self.colour = flip, colour

    def __call__(self, image, label, rng):
        label = as_label(label)
        height, width = image.shape[:2]
        canvas, offset = sample_expansion(width, height, self.max_expand, rng)
        boxes = label[:, 1:5] + np.tile(offset, 2)
        window = sample_crop(canvas, boxes, self.min_ious, rng)
        flip = self.flip and rng.uniform() < APPLY_PROBABILITY
        size = (self.data_shape,) * 2
        affine = window_affine(window, offset, size, flip)
        return self.render(image, label[centres_inside(boxes, window)], affine, size,
                           rng if self.colour else None)


class ShortSideValTransform(ValTransform):
    """Resize keeping the aspect ratio, the short side to ``short_side`` with the long side
    at most ``max_size`` (:func:`zoo.schema.preprocessing.scaled_size`), and normalise; no
    randomness; the image is resized by ``interpolation``. Returns ``(data, label, scale)``;
    a loader pads its batches onto canvases whose sides are multiples of ``size_divisor``."""

    def __init__(self, short_side, max_size, size_divisor, mean_pixels=MEAN_PIXELS,
                 std_pixels=STD_PIXELS, interpolation=WARP):
        super().__init__(short_side, mean_pixels, std_pixels, interpolation)
        self.max_size, self.size_divisor = int(max_size), int(size_divisor)

    def __call__(self, image, label, rng=None):
        return self.resized(image, as_label(label), flip=False)

    def resized(self, image, label, flip, colour_rng=None):
        """``(data, label, scale)`` of the whole image, mirrored if ``flip``."""
        height, width = image.shape[:2]
        new_height, new_width, scale = scaled_size(height, width, self.data_shape,
                                                   self.max_size)
        affine = window_affine((0, 0, width, height), (0, 0), (new_height, new_width), flip)
        return self.render(image, label, affine, (new_height, new_width), colour_rng) + (scale,)


class ShortSideTrainTransform(ShortSideValTransform):
    """Faster R-CNN augmentation (as GluonCV's ``FasterRCNNDefaultTrainTransform``, plus
    SSD's colour jitter): a random horizontal flip of the whole image, then the short-side
    resize; no expansion or crop, whose zoom would fight the fixed scale."""

    def __init__(self, short_side, max_size, size_divisor, mean_pixels=MEAN_PIXELS,
                 std_pixels=STD_PIXELS, flip=True, colour=True):
        super().__init__(short_side, max_size, size_divisor, mean_pixels, std_pixels)
        self.flip, self.colour = flip, colour

    def __call__(self, image, label, rng):
        flip = self.flip and rng.uniform() < APPLY_PROBABILITY
        return self.resized(image, as_label(label), flip, rng if self.colour else None)


def inference_transform(preprocessing):
    """The deterministic transform a preprocessing dict (:mod:`zoo.schema.preprocessing`, a
    model's or an artifact's) describes: :class:`ShortSideValTransform` for
    ``"short_side"``, else :class:`ValTransform` (an artifact without ``resize`` was
    stretched), resizing by the dict's :func:`~zoo.schema.preprocessing.interpolation_of`."""
    pixels = preprocessing["mean"], preprocessing["std"], interpolation_of(preprocessing)
    if preprocessing.get("resize") == "short_side":
        return ShortSideValTransform(preprocessing["short_side"], preprocessing["max_size"],
                                     preprocessing["size_divisor"], *pixels)
    return ValTransform(preprocessing["data_shape"][0], *pixels)


def train_transform(preprocessing, max_expand=4.0, crop=True, colour=True):
    """The augmentation of a preprocessing dict: :class:`ShortSideTrainTransform` for
    ``"short_side"`` (``max_expand`` and ``crop``, SSD's zoom-out and IoU-constrained
    crop, do not apply), else :class:`TrainTransform`; ``colour``: the colour jitter. It
    warps whatever the dict's ``interpolation``: crops, zooms and flips are one warp."""
    statistics = preprocessing["mean"], preprocessing["std"]
    if preprocessing.get("resize") == "short_side":
        return ShortSideTrainTransform(preprocessing["short_side"], preprocessing["max_size"],
                                       preprocessing["size_divisor"], *statistics,
                                       colour=colour)
    return TrainTransform(preprocessing["data_shape"][0], *statistics, max_expand=max_expand,
                          colour=colour, **({} if crop else {"min_ious": (None,)}))


def pad_batch(samples, size_divisor, batch_size=None):
    """``(data, im_info)`` of a batch of transform outputs, in ``batch_size`` slots (None:
    one per sample); slots past the samples (padding of a short batch) hold zeros, the
    mean pixel once normalised.

    With ``size_divisor`` None the samples are one size (stretched) and im_info is None.
    Else they are short-side outputs ``(data, label, scale)``: data ``(batch_size, 3, H,
    W)`` has each sample's ``(3, h, w)`` at the top left, ``H, W`` their
    :func:`~zoo.schema.preprocessing.canvas_size`, and im_info ``(batch_size, 3)`` rows ``[h, w,
    scale]``; an empty slot's is the whole canvas."""
    batch_size = len(samples) if batch_size is None else batch_size
    if size_divisor is None:
        data = np.zeros((batch_size,) + samples[0][0].shape, np.float32)
        for slot, sample in enumerate(samples):
            data[slot] = sample[0]
        return data, None
    height, width = canvas_size([sample[0].shape[1:] for sample in samples], size_divisor)
    data = np.zeros((batch_size, 3, height, width), np.float32)
    im_info = np.tile(np.array([[height, width, 1.0]], np.float32), (batch_size, 1))
    for slot, (image, _, scale) in enumerate(samples):
        data[slot, :, :image.shape[1], :image.shape[2]] = image
        im_info[slot] = image.shape[1], image.shape[2], scale
    return data, im_info


_scratch = threading.local()


def scratch(name, shape, dtype):
    """This thread's reusable array ``name``, (re)made when ``shape`` or ``dtype`` changes.

    The intermediate images live in these rather than in fresh arrays: when loader threads
    free a few MB per sample, glibc hands that memory back to the kernel (it trims the
    threads' arenas) and the next sample's pages fault in afresh, which cost as much as the
    image work itself (measured: 1,850 page faults per 512x512 sample, 25 with these).
    """
    array = _scratch.__dict__.get(name)
    if array is None or array.shape != shape or array.dtype != dtype:
        array = _scratch.__dict__[name] = np.empty(shape, dtype)
    return array


def as_label(label):
    """A label as an (M, 6) float32 array."""
    return np.asarray(label, dtype=np.float32).reshape(-1, 6)


def sample_expansion(width, height, max_ratio, rng):
    """A zoom-out: ``((canvas_width, canvas_height), (x_offset, y_offset))`` of the image on it."""
    if max_ratio <= 1 or rng.uniform() >= APPLY_PROBABILITY:
        return (width, height), np.zeros(2)
    ratio = rng.uniform(1, max_ratio)
    canvas = (width * ratio, height * ratio)
    return canvas, rng.uniform(0, 1, size=2) * (np.array(canvas) - (width, height))


def sample_crop(canvas, boxes, min_ious, rng):
    """SSD's crop window ``(x0, y0, x1, y1)`` on a canvas of size ``canvas``.

    The constraints in ``min_ious`` are tried in random order, and the first
    that can be met decides, so the choice is uniform among the feasible ones
    (as in SSD, which redraws until a constraint is met). For a constraint,
    ``CROP_TRIALS`` windows of 30-100% of each side with aspect ratio within
    1:2 and 2:1 are drawn; it is met by the first in which some box whose
    centre lies inside has at least that IoU with the window. None is met by
    the whole canvas. An image without boxes takes the first valid window.
    """
    whole = np.array([0, 0, canvas[0], canvas[1]], dtype=np.float64)
    for choice in rng.permutation(len(min_ious)):
        if min_ious[choice] is None:
            return whole
        window = constrained_window(canvas, boxes, min_ious[choice], rng)
        if window is not None:
            return window
    return whole


def constrained_window(canvas, boxes, min_iou, rng):
    """The first of ``CROP_TRIALS`` random windows meeting ``min_iou``, or None."""
    sides = rng.uniform(CROP_MIN_SCALE, 1, size=(CROP_TRIALS, 2)) * canvas
    corners = rng.uniform(0, 1, size=(CROP_TRIALS, 2)) * (np.array(canvas) - sides)
    windows = np.hstack([corners, corners + sides])
    aspect = sides[:, 1] / sides[:, 0]
    valid = (aspect >= 1 / CROP_MAX_ASPECT) & (aspect <= CROP_MAX_ASPECT)
    if len(boxes):
        fits = (iou(windows, boxes) >= min_iou) & centres_inside(boxes, windows.T[:, :, None])
        valid &= fits.any(axis=1)
    chosen = np.flatnonzero(valid)
    return windows[chosen[0]] if chosen.size else None


def centres_inside(boxes, window):
    """Which boxes have their centre strictly inside ``window`` (x0, y0, x1, y1).

    ``window``'s coordinates may be arrays that broadcast against the boxes.
    """
    centre_x = (boxes[:, 0] + boxes[:, 2]) / 2
    centre_y = (boxes[:, 1] + boxes[:, 3]) / 2
    x0, y0, x1, y1 = window
    return (centre_x > x0) & (centre_x < x1) & (centre_y > y0) & (centre_y < y1)


def window_affine(window, offset, size, flip):
    """The map ``out = scale * source + shift`` per axis taking a canvas window to an
    output of ``size`` ``(height, width)``, for a source placed at ``offset`` on the canvas.

    Returns ``((scale_x, shift_x), (scale_y, shift_y))`` in edge coordinates
    (pixel ``i`` spans [i, i + 1)); a flip mirrors the x axis.
    """
    x0, y0, x1, y1 = window
    height, width = size
    scale_x, scale_y = width / (x1 - x0), height / (y1 - y0)
    shift_x, shift_y = scale_x * (offset[0] - x0), scale_y * (offset[1] - y0)
    if flip:
        scale_x, shift_x = -scale_x, width - shift_x
    return (scale_x, shift_x), (scale_y, shift_y)


def warp_image(image, affine, size, fill, out=None):
    """Apply an edge-coordinate affine map to an image, giving ``size`` ``(height, width)``;
    uncovered pixels get ``fill``. The result is written to ``out`` when it is an image of
    that size like ``image``."""
    (scale_x, shift_x), (scale_y, shift_y) = affine
    # warpAffine maps pixel centres; centre c sits at edge coordinate c + 0.5.
    matrix = np.array([[scale_x, 0, shift_x + 0.5 * scale_x - 0.5],
                       [0, scale_y, shift_y + 0.5 * scale_y - 0.5]])
    return cv2.warpAffine(image, matrix, (size[1], size[0]), dst=out, flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=tuple(map(float, fill)))


def resize_image(image, size, interpolation, out=None):
    """An image resized to ``size`` ``(height, width)`` by ``cv2.resize`` as the
    :data:`~zoo.schema.preprocessing.INTERPOLATIONS` name ``interpolation`` (not ``warp``) says,
    written to ``out`` when it is an image of that size like ``image``. The result is MXNet's
    ``imresize``'s (its own OpenCV 3.4) value for value, but for a few bicubic values in a
    million, one grey level apart: OpenCV 4 rounds that vertical pass otherwise."""
    height, width = image.shape[:2]
    method = cv2.INTER_CUBIC if interpolation == "bicubic" else cv2.INTER_LINEAR
    if interpolation == "auto" and size[0] < height and size[1] < width:
        method = cv2.INTER_AREA
    elif interpolation == "auto" and size[0] > height and size[1] > width:
        method = cv2.INTER_CUBIC
    # MXNet's OpenCV runs without Intel's IPP, whose bicubic rounds otherwise (one grey level
    # apart in about 4% of the values); the switch is per thread.
    used = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        return cv2.resize(image, (size[1], size[0]), dst=out, interpolation=method)
    finally:
        cv2.ipp.setUseIPP(used)


def mapped_label(label, affine, size):
    """An (M, 6) float32 label with its boxes through an affine map (:func:`map_boxes`)."""
    if len(label) == 0:  # an image for inference: numpy's calls would cost 0.08 ms for nothing
        return np.zeros((0, label.shape[1]), np.float32)
    boxes = map_boxes(label[:, 1:5], affine, size)
    return np.column_stack([label[:, :1], boxes, label[:, 5:]]).astype(np.float32)


def map_boxes(boxes, affine, size):
    """Pixel boxes through an affine map, clipped to the output of ``size``
    ``(height, width)`` and normalised to [0, 1]."""
    (scale_x, shift_x), (scale_y, shift_y) = affine
    xs = boxes[:, [0, 2]] * scale_x + shift_x
    ys = boxes[:, [1, 3]] * scale_y + shift_y
    xs.sort(axis=1)  # a flip swaps left and right edges
    mapped = np.column_stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]])
    extent = np.array([size[1], size[0], size[1], size[0]], dtype=mapped.dtype)
    return np.clip(mapped, 0, extent) / extent


def jitter_colour(image, rng, out=None):
    """SSD's photometric distortion of an RGB image (uint8, or float32 in [0, 255]) as a
    float32 image in [0, 255]: a new one, or ``out`` (a float32 array of the same shape).

    Brightness shift (up to 32), contrast scale (0.5-1.5), saturation scale
    (0.5-1.5) and hue shift (up to 18 degrees), each with probability 1/2;
    contrast comes before or after the HSV steps at random.
    """
    brightness = rng.uniform(-32, 32) if rng.uniform() < APPLY_PROBABILITY else 0.0
    contrast_first = rng.uniform() < APPLY_PROBABILITY
    contrast = rng.uniform(0.5, 1.5) if rng.uniform() < APPLY_PROBABILITY else 1.0
    saturation = rng.uniform(0.5, 1.5) if rng.uniform() < APPLY_PROBABILITY else 1.0
    hue = rng.uniform(-18, 18) if rng.uniform() < APPLY_PROBABILITY else 0.0
    first_contrast, last_contrast = (contrast, 1.0) if contrast_first else (1.0, contrast)

    def levels(values):
        """Brightness and the first contrast, clipped: the steps before the HSV ones."""
        return np.clip((values + np.float32(brightness)) * np.float32(first_contrast), 0, 255)
    if saturation == 1.0 and hue == 0.0:  # then the last contrast acts on each value alone too
        return apply_levels(image, lambda values: np.clip(
            levels(values) * np.float32(last_contrast), 0, 255), out)
    # Every step works in place in one buffer (see scratch() for why).
    # Float HSV in OpenCV: H in [0, 360), S and V in [0, 1] for RGB in [0, 1].
    pixels = apply_levels(image, lambda values: levels(values) / 255, out)
    pixels = cv2.cvtColor(pixels, cv2.COLOR_RGB2HSV, dst=pixels)
    # one pass shifts H and scales S; HSV2RGB wraps H itself, so H may pass 360
    pixels = cv2.transform(pixels, np.array([[1, 0, 0, hue % 360], [0, saturation, 0, 0],
                                             [0, 0, 1, 0]], dtype=np.float32), dst=pixels)
    if saturation > 1:  # S <= 1; it is never negative
        pixels = cv2.min(pixels, (np.inf, 1.0, np.inf, 0.0), dst=pixels)
    pixels = cv2.cvtColor(pixels, cv2.COLOR_HSV2RGB, dst=pixels)  # in [0, 1] as S and V are
    # contrast then clipping to [0, 1] is min(rgb, 1 / contrast) * contrast
    if last_contrast > 1:
        np.minimum(pixels, np.float32(1 / last_contrast), out=pixels)
    pixels *= np.float32(255 * last_contrast)
    return pixels


def apply_levels(image, levels, out=None):
    """``levels`` (a function of each float32 value alone) applied to an image, as a new
    float32 image or in ``out``; a uint8 image goes through a 256-entry table of it, which
    costs one lookup per value."""
    if image.dtype == np.uint8:
        return cv2.LUT(image, levels(np.arange(256, dtype=np.float32)), dst=out)
    values = levels(image.astype(np.float32))
    if out is None:
        return values
    out[...] = values
    return out


def normalise(image, mean_pixels, std_pixels):
    """HWC image (uint8 or float32) -> CHW float32 ``(image - mean) / std``."""
    # Each output plane is one cv2.transform pass with a 1x4 row (scale, offset) written
    # straight into place: no transposing copy, and several times faster than per-channel
    # subtract and multiply, with OpenCV scalars or NumPy broadcasting alike.
    image = image.astype(np.float32, copy=False)
    inverse_std = 1 / np.asarray(std_pixels, dtype=np.float64)
    rows = np.column_stack([np.diag(inverse_std), -np.asarray(mean_pixels) * inverse_std])
    output = np.empty((3,) + image.shape[:2], dtype=np.float32)
    for plane, row in zip(output, rows.astype(np.float32)):
        cv2.transform(image, row[None], dst=plane)
    return output
