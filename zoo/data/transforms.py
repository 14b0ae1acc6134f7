"""SSD training augmentation and the validation transform.

A transform takes ``(image, label, rng)``: an HxWx3 uint8 RGB image, an (M, 6)
label ``[class_id, x1, y1, x2, y2, difficult]`` in pixels and a
``numpy.random.RandomState`` that supplies every random choice. It returns a
(3, S, S) float32 array normalised by the mean and std pixels, and the label
with boxes normalised to [0, 1].

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

from ..boxes import iou
from ..preprocessing import MEAN_PIXELS, STD_PIXELS
MIN_IOUS = (None, 0.1, 0.3, 0.5, 0.7, 0.9)
"""SSD's crop constraints: None keeps the whole image, a number needs a box with that IoU."""

CROP_TRIALS = 50
CROP_MIN_SCALE = 0.3
CROP_MAX_ASPECT = 2.0
APPLY_PROBABILITY = 0.5
"""Probability of each colour step, of expansion and of the flip."""


class ValTransform:
    """Resize to ``data_shape`` x ``data_shape`` and normalise; no randomness."""

    def __init__(self, data_shape, mean_pixels=MEAN_PIXELS, std_pixels=STD_PIXELS):
        self.data_shape = int(data_shape)
        self.mean_pixels = np.asarray(mean_pixels, dtype=np.float32)
        self.std_pixels = np.asarray(std_pixels, dtype=np.float32)

    def __call__(self, image, label, rng=None):
        height, width = image.shape[:2]
        affine = window_affine((0, 0, width, height), (0, 0), self.data_shape, flip=False)
        return self.render(image, as_label(label), affine)

    def render(self, image, label, affine, colour_rng=None):
        """The output of an image and its pixel label under an affine map, with colour
        jitter drawn from ``colour_rng`` when one is given."""
        shape = (self.data_shape, self.data_shape, 3)
        warped = warp_image(image, affine, self.data_shape, self.mean_pixels,
                            out=scratch("warped", shape, np.uint8))
        pixels = scratch("pixels", shape, np.float32)
        if colour_rng is None:
            np.copyto(pixels, warped)
        else:
            pixels = jitter_colour(warped, colour_rng, out=pixels)
        boxes = map_boxes(label[:, 1:5], affine, self.data_shape)
        return (normalise(pixels, self.mean_pixels, self.std_pixels),
                np.column_stack([label[:, :1], boxes, label[:, 5:]]).astype(np.float32))


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
        affine = window_affine(window, offset, self.data_shape, flip)
        return self.render(image, label[centres_inside(boxes, window)], affine,
                           rng if self.colour else None)


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
    """The map ``out = scale * source + shift`` per axis taking a canvas window to a
    ``size`` x ``size`` output, for a source placed at ``offset`` on the canvas.

    Returns ``((scale_x, shift_x), (scale_y, shift_y))`` in edge coordinates
    (pixel ``i`` spans [i, i + 1)); a flip mirrors the x axis.
    """
    x0, y0, x1, y1 = window
    scale_x, scale_y = size / (x1 - x0), size / (y1 - y0)
    shift_x, shift_y = scale_x * (offset[0] - x0), scale_y * (offset[1] - y0)
    if flip:
        scale_x, shift_x = -scale_x, size - shift_x
    return (scale_x, shift_x), (scale_y, shift_y)


def warp_image(image, affine, size, fill, out=None):
    """Apply an edge-coordinate affine map to an image; uncovered pixels get ``fill``.
    The result is written to ``out`` when it is a ``size`` x ``size`` image like ``image``."""
    (scale_x, shift_x), (scale_y, shift_y) = affine
    # warpAffine maps pixel centres; centre c sits at edge coordinate c + 0.5.
    matrix = np.array([[scale_x, 0, shift_x + 0.5 * scale_x - 0.5],
                       [0, scale_y, shift_y + 0.5 * scale_y - 0.5]])
    return cv2.warpAffine(image, matrix, (size, size), dst=out, flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=tuple(map(float, fill)))


def map_boxes(boxes, affine, size):
    """Pixel boxes through an affine map, clipped to the output and normalised to [0, 1]."""
    (scale_x, shift_x), (scale_y, shift_y) = affine
    xs = boxes[:, [0, 2]] * scale_x + shift_x
    ys = boxes[:, [1, 3]] * scale_y + shift_y
    xs.sort(axis=1)  # a flip swaps left and right edges
    mapped = np.column_stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]])
    return np.clip(mapped, 0, size) / size


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
