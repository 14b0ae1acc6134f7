"""Pictures: detections drawn on an image, and training curves from the per-epoch CSV log."""
import colorsys
import csv
import json
import os

import cv2
import numpy as np
import simplejpeg
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from zoo.inference.runner import SCORE_THRESHOLD, Detections, label_names, rgb_image
from zoo.atomicfile import atomic_write, write_bytes
from zoo.errors import DataError
from zoo.runfiles import LOG_SUFFIX, health_path

__all__ = ["ENCODINGS", "class_color", "draw", "draw_boxes", "draw_detections", "encode_image",
           "log_health_warnings", "pixel_box", "plot_training_log", "save_image", "save_png"]

FONT = cv2.FONT_HERSHEY_SIMPLEX
# Stepping the hue by the golden ratio keeps the colours of neighbouring class ids apart.
HUE_STEP = 0.618033988749895
LABEL_PADDING = 2
MAP_COLUMN = "val_map"
"""A training run's CSV log is ``<prefix>-log.csv``."""
ENCODINGS = {".jpg": ".jpg", ".jpeg": ".jpg", ".png": ".png", ".bmp": ".bmp", ".tif": ".tiff",
             ".tiff": ".tiff", ".webp": ".webp"}
"""File extension (any case): the encoding its file gets, so the bytes match the name."""
JPEG_QUALITY = 95


def class_color(class_id):
    """The RGB colour of a class id: bright, the same on every call."""
    hue = (class_id * HUE_STEP) % 1.0
    return tuple(int(round(255 * c)) for c in colorsys.hsv_to_rgb(hue, 0.85, 0.95))


def text_color(background):
    """Black or white, whichever reads better on the RGB ``background``."""
    red, green, blue = background
    return (0, 0, 0) if 0.299 * red + 0.587 * green + 0.114 * blue > 140 else (255, 255, 255)


def label_origin(label_size, box, image_size):
    """Top-left corner of a label of ``label_size`` (w, h) for the pixel ``box`` (x1, y1, ...).

    Above the box when there is room, else just inside its top edge; moved left or up
    where needed so that the whole label stays inside the image of ``image_size`` (w, h).
    """
    (label_w, label_h), (image_w, image_h) = label_size, image_size
    x1, y1 = box[0], box[1]
    top = y1 - label_h if y1 >= label_h else y1
    return max(0, min(x1, image_w - label_w)), max(0, min(top, image_h - label_h))


def visible_detections(detections, score_threshold):
    """Rows ``[class_id, score, x1, y1, x2, y2]`` worth drawing: rows with a negative
    class (suppressed or padding) or a score under the threshold are dropped."""
    rows = np.asarray(detections, dtype=np.float64).reshape(-1, 6)
    return rows[(rows[:, 0] >= 0) & (rows[:, 1] >= score_threshold)]


def pixel_box(box, width, height):
    """Integer pixel corners of a box in pixels, clipped to the image."""
    limit = np.array([width - 1, height - 1, width - 1, height - 1])
    return tuple(int(v) for v in np.clip(np.round(box), 0, limit))


def draw_label(image, text, box, color, font_scale):
    """Write ``text`` on a filled box of ``color`` at the top of the pixel ``box``."""
    (text_w, text_h), baseline = cv2.getTextSize(text, FONT, font_scale, 1)
    label_size = (text_w + 2 * LABEL_PADDING, text_h + baseline + 2 * LABEL_PADDING)
    left, top = label_origin(label_size, box, (image.shape[1], image.shape[0]))
    cv2.rectangle(image, (left, top), (left + label_size[0] - 1, top + label_size[1] - 1),
                  color, thickness=cv2.FILLED)
    cv2.putText(image, text, (left + LABEL_PADDING, top + LABEL_PADDING + text_h), FONT,
                font_scale, text_color(color), 1, cv2.LINE_AA)


def draw(image, detections):
    """A copy of ``image`` (a path or an array, as :class:`zoo.Detector` takes them) as
    RGB uint8 with the boxes, names and scores of ``detections`` (:class:`zoo.Detections`,
    boxes in pixels of the image) drawn, each class in its own colour, the most confident
    labels on top. A photo file is drawn in the frame of ``detections.frame``."""
    # OpenCV draws on C-ordered arrays only, and the caller's array stays untouched.
    exif = "ignore" if detections.frame == "stored" else "apply"
    image = np.array(rgb_image(image, exif=exif), copy=True, order="C")
    texts = ["%s %.2f" % (name, score) for name, score in zip(detections.names,
                                                               detections.scores)]
    return draw_boxes(image, detections.boxes, detections.labels, texts,
                      np.argsort(detections.scores, kind="stable"))


def draw_boxes(image, boxes, labels, texts, order=None):
    """Draw pixel ``boxes`` on ``image`` (RGB uint8, C-ordered) in place, each in its
    label's colour with its text on top, in ``order`` (the last on top; None: as given);
    returns the image. What :func:`draw` draws detections with, and the training-health
    pictures ground truth."""
    height, width = image.shape[:2]
    thickness = max(1, round(min(height, width) / 300))
    font_scale = max(0.4, min(height, width) / 1000)
    for index in range(len(boxes)) if order is None else order:
        box = pixel_box(boxes[index], width, height)
        color = class_color(int(labels[index]))
        cv2.rectangle(image, box[:2], box[2:], color, thickness)
        draw_label(image, texts[index], box, color, font_scale)
    return image


def draw_detections(image_rgb, detections, class_names, score_threshold=SCORE_THRESHOLD):
    """:func:`draw` for the model's output rows ``[class_id, score, x1, y1, x2, y2]`` with
    corners normalised to [0, 1]; rows with class -1 or a score under ``score_threshold``
    are skipped."""
    image = rgb_image(image_rgb)
    height, width = image.shape[:2]
    rows = visible_detections(detections, score_threshold)
    labels = rows[:, 0].astype(np.int64)
    return draw(image, Detections(
        boxes=rows[:, 2:6] * [width, height, width, height], scores=rows[:, 1], labels=labels,
        names=label_names(class_names, labels)))


def save_png(path, image_rgb):
    """Write an RGB uint8 image as a PNG file (whatever the extension of ``path``),
    atomically."""
    ok, encoded = cv2.imencode(".png", cv2.cvtColor(np.asarray(image_rgb), cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("could not encode the image as PNG")
    write_bytes(path, encoded.tobytes())


def encode_image(image_rgb, extension):
    """The bytes of an RGB uint8 image encoded as the file ``extension`` (a key of
    :data:`ENCODINGS`, any case) says; ValueError naming it for another."""
    encoding = ENCODINGS.get(extension.lower())
    if encoding is None:
        raise ValueError("cannot write a %r picture: expected one of %s"
                         % (extension, ", ".join(sorted(ENCODINGS))))
    if encoding == ".jpg":
        # libjpeg-turbo through simplejpeg, the library that decodes the zoo's JPEGs; 4:2:0
        # chroma subsampling, as OpenCV's encoder had by default.
        return simplejpeg.encode_jpeg(np.ascontiguousarray(image_rgb), quality=JPEG_QUALITY,
                                      colorspace="RGB", colorsubsampling="420")
    ok, encoded = cv2.imencode(encoding, cv2.cvtColor(np.asarray(image_rgb), cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("could not encode the image as %s" % encoding)
    return encoded.tobytes()


def save_image(path, image_rgb):
    """Write an RGB uint8 image encoded as its extension says (JPEG for ``.jpg``, PNG for
    ``.png``, ...), atomically: a reader never sees half a file."""
    # Not flushed to disk one by one: zoo detect writes thousands, and a picture lost to a
    # power cut is drawn again by rerunning.
    write_bytes(path, encode_image(image_rgb, os.path.splitext(path)[1]), durable=False)


def read_log_rows(csv_path):
    """The rows of a per-epoch training CSV log as dicts; raises DataError if unusable."""
    with open(csv_path, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        columns = reader.fieldnames or []
    if "epoch" not in columns:
        raise DataError("%s: no 'epoch' column (columns: %s)"
                        % (csv_path, ", ".join(columns) or "none"))
    if not rows:
        raise DataError("%s: no rows after the header" % csv_path)
    return rows


def log_column(rows, name):
    """One column of the log as floats, NaN where a cell is empty (e.g. no validation)."""
    values = []
    for line, row in enumerate(rows, start=2):
        cell = (row.get(name) or "").strip()
        try:
            values.append(float(cell) if cell else np.nan)
        except ValueError:
            raise DataError("line %d: %s = %r is not a number" % (line, name, cell)) from None
    return np.array(values)


def is_loss_column(name):
    """Loss columns are named ``loss`` or end with ``_loss``."""
    return name == "loss" or name.endswith("_loss")


def plot_losses(axes, rows, epochs):
    """Draw every loss column against the epoch."""
    for name in (n for n in rows[0] if is_loss_column(n)):
        axes.plot(epochs, log_column(rows, name), marker=".", label=name)
    if axes.lines:
        axes.legend()
    else:
        axes.text(0.5, 0.5, "no loss columns", ha="center", transform=axes.transAxes)
    axes.set(title="training loss", xlabel="epoch", ylabel="loss")


def plot_map(axes, rows, epochs):
    """Draw the validation mAP of the epochs that were validated."""
    values = log_column(rows, MAP_COLUMN)
    validated = ~np.isnan(values)
    if validated.any():
        best = np.nanargmax(values)
        axes.plot(epochs[validated], values[validated], marker="o", color="tab:green")
        axes.set_title("validation mAP (best %.4f at epoch %g)" % (values[best], epochs[best]))
        axes.set_ylim(bottom=0)
    else:
        axes.set_title("validation mAP")
        axes.text(0.5, 0.5, "no validation results", ha="center", transform=axes.transAxes)
    axes.set(xlabel="epoch", ylabel="mAP")


def log_health_warnings(csv_path):
    """``(path, warnings)``: the health record a training run wrote beside its CSV log
    (``<prefix>-log.csv`` beside ``<prefix>-health.json``) and its warnings, each a dict with
    ``check``, ``epoch`` (from 1; None: before training) and ``message``; ``(None, [])``
    where there is none (a log of another name, or a run with ``--no-health``)."""
    name = str(csv_path)
    if not name.endswith(LOG_SUFFIX):
        return None, []
    path = health_path(name[:-len(LOG_SUFFIX)])
    try:
        with open(path) as stream:
            record = json.load(stream)
    except (OSError, ValueError):
        return None, []
    found = record.get("warnings") if isinstance(record, dict) else None
    return path, [w for w in found or () if isinstance(w, dict) and "check" in w]


def mark_warnings(axes, warnings):
    """A dashed red line per epoch that had health warnings, named by their checks, in the
    middle of that epoch (epoch 0: before training)."""
    checks = {}
    for warning in warnings:
        epoch = warning.get("epoch")
        where = 0.0 if not isinstance(epoch, (int, float)) else epoch - 0.5
        checks.setdefault(where, [])
        if warning["check"] not in checks[where]:
            checks[where].append(warning["check"])
    for where, names in sorted(checks.items()):
        axes.axvline(where, color="tab:red", linestyle="--", linewidth=1)
        axes.text(where, 0.98, " " + ", ".join(names), color="tab:red", rotation=90,
                  fontsize=7, ha="right", va="top", transform=axes.get_xaxis_transform())


def plot_training_log(csv_path, png_path):
    """Write a PNG with the loss curves (left) and the validation mAP curve (right).

    ``csv_path`` is the per-epoch log: an ``epoch`` column, loss columns (``loss``
    or ``*_loss``) and ``val_map``, empty on epochs without validation. The warnings of
    the health record beside it (:func:`log_health_warnings`) are marked on both curves,
    in the epoch they came in. Raises FileNotFoundError if it is missing and ValueError if
    it has no ``epoch`` column, no rows or a cell that is not a number. Returns
    ``png_path``.
    """
    rows = read_log_rows(csv_path)
    epochs = log_column(rows, "epoch")
    figure = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    loss_axes, map_axes = figure.subplots(1, 2, sharex=True)
    plot_losses(loss_axes, rows, epochs)
    plot_map(map_axes, rows, epochs)
    warnings = log_health_warnings(csv_path)[1]
    for axes in (loss_axes, map_axes):
        mark_warnings(axes, warnings)
        axes.grid(alpha=0.3)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.suptitle(os.path.basename(str(csv_path)))
    figure.tight_layout()
    atomic_write(png_path, lambda temporary: figure.savefig(temporary, format="png"))
    return png_path
