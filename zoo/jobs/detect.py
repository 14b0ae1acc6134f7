"""Run a detector over many pictures (files, folders, globs, list files, video frames) and
write what it found: one results JSON, drawn pictures, optionally crops and text files.

Output layout under ``output``::

    results.json            every picture: file, video frame, size, detections; skipped files
    pictures/NAME.EXT       the detections drawn, EXT the input's format or ``image_format``
    crops/CLASS/NAME_K.EXT  with ``crops``: detection K of picture NAME, cut out
    labels/NAME.txt         with ``txt``: one line per detection, ``class score x1 y1 x2 y2``

The images go through the detector's own batch runner, so results do not depend on the
batch size; pictures and crops are encoded and written on idle-priority threads, in the
cycles inference leaves (where the graph fills every core, mostly while detection waits for
them). Every file is written atomically.
"""
import collections
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from zoo.errors import DataError, OptionsError
from zoo.inference.inputs import LIST_PREFIX, InputImages, expand_inputs
from zoo.inference.runner import lower_priority
from zoo.inference.visualize import ENCODINGS, draw, pixel_box, save_image

__all__ = ["DetectOptions", "DetectSummary", "FORMATS", "detect", "open_detector"]

LOG = logging.getLogger(__name__)
RESULTS_FILE = "results.json"
FORMATS = ("png", "jpg")
VIDEO_PICTURE_EXTENSION = ".jpg"
WRITERS = 2
"""Threads encoding and writing pictures: one keeps up with inference on most graphs, two
absorb a slow disk."""
MAX_WAITING = 32
"""Pictures waiting to be written before detection waits for them (their decoded images
are held in memory)."""


@dataclass(frozen=True)
class DetectOptions:
    checkpoint: str                          # artifact prefix (fp32, int8) or a .onnx file
    inputs: Tuple[str, ...]                  # files, folders, globs, @LIST files
    output: str = os.path.join("output", "detect")
    epoch: Optional[int] = None              # None: the best validated epoch, else the newest
    lists: Tuple[str, ...] = ()              # text files listing inputs, one a line
    recursive: bool = False                  # folders: their subfolders too
    every: int = 1                           # videos: every Nth frame
    threshold: float = 0.5                   # lowest score kept
    max_detections: int = 100                # the best-scoring ones kept per picture
    classes: Tuple[str, ...] = ()            # () all, else only these class names
    batch_size: int = 8
    image_format: Optional[str] = None       # None: each input's format; "png" or "jpg"
    pictures: bool = True                    # write the drawn pictures
    crops: bool = False                      # one picture per detection, a folder per class
    txt: bool = False                        # one text file per picture
    strict: bool = False                     # stop at the first unreadable file
    exif: str = "apply"                      # "apply": photos as a viewer shows them
    progress: bool = True

    def __post_init__(self):
        if not (self.inputs or self.lists):
            raise OptionsError("no inputs: name files, folders, globs or list files")
        if min(self.every, self.batch_size, self.max_detections) < 1:
            raise OptionsError("every, batch_size and max_detections must be at least 1, got "
                               "%r, %r and %r" % (self.every, self.batch_size,
                                                 self.max_detections))
        if not 0.0 <= self.threshold <= 1.0:
            raise OptionsError("threshold must be in [0, 1], got %r" % self.threshold)
        if self.image_format not in (None,) + FORMATS:
            raise OptionsError("image_format must be one of %s, got %r"
                               % (", ".join(FORMATS), self.image_format))
        if self.checkpoint.endswith(".onnx") and self.epoch is not None:
            raise OptionsError("epoch %d: an ONNX file holds one set of weights, it has no "
                               "epochs" % self.epoch)


@dataclass(frozen=True)
class DetectSummary:
    images: int            # pictures detected on (video frames count one each)
    detections: int
    skipped: int           # files that could not be read
    output: str            # the output folder
    results: str           # the results JSON file

    def __str__(self):
        return ("%d images, %d detections, %d skipped; results in %s"
                % (self.images, self.detections, self.skipped, self.output))


def open_detector(checkpoint, epoch=None, exif="apply"):
    """The detector of ``checkpoint``, on the runtime its file asks for: a ``.onnx`` file
    on ONNX Runtime, an OpenVINO ``.xml`` on OpenVINO, an artifact prefix (fp32 or int8) on
    MXNet; ``exif`` as :class:`zoo.Detector` takes it."""
    from zoo.onnx.deployed import is_deployed, load_deployed_detector
    if is_deployed(checkpoint):
        return load_deployed_detector(checkpoint, exif=exif)
    from zoo.inference.detector import load_detector
    return load_detector(checkpoint, epoch, exif=exif)


def class_filter(class_names, wanted):
    """The label ids of the ``wanted`` class names (all labels for none); an unknown name is
    an OptionsError naming it and the detector's classes."""
    if not wanted:
        return None
    unknown = [name for name in wanted if name not in class_names]
    if unknown:
        raise OptionsError("classes: unknown class %s: the detector's classes are %s"
                           % (", ".join(map(repr, unknown)), ", ".join(class_names)))
    return np.array([class_names.index(name) for name in wanted])


def kept(rows, labels):
    """Output ``rows`` of the class ids ``labels`` only (all for None), chosen before the
    best ``max_detections`` are, so other classes do not crowd the wanted ones out."""
    return rows if labels is None else rows[np.isin(rows[:, 0], labels)]


def output_names(inputs):
    """A file-name stem per input, unique in the output folder: the file's stem, the video
    frame appended, ``-2``, ``-3``... where two inputs share one."""
    names, used = [], set()
    for item in inputs:
        stem = os.path.splitext(os.path.basename(item.path))[0]
        if item.video_frame is not None:
            stem = "%s_frame%06d" % (stem, item.video_frame)
        name, count = stem, 1
        while name in used:
            count += 1
            name = "%s-%d" % (stem, count)
        used.add(name)
        names.append(name)
    return names


def picture_extension(item, image_format):
    """The extension (and so the encoding) of a picture drawn from ``item``: the asked
    format, else the input's own where the zoo can write it, else PNG."""
    if image_format is not None:
        return "." + image_format
    if item.video_frame is not None:
        return VIDEO_PICTURE_EXTENSION
    extension = os.path.splitext(item.path)[1].lower()
    return ENCODINGS.get(extension, ".png")


def crop(image, box):
    """The pixels of ``box`` (corners in pixels), at least one pixel each way."""
    x1, y1, x2, y2 = pixel_box(box, image.shape[1], image.shape[0])
    return image[y1:max(y2, y1 + 1), x1:max(x2, x1 + 1)]


def detection_rows(found):
    """The detections as JSON objects (with their COCO ``category_id`` where the detector
    has COCO ids)."""
    categories = ([{}] * len(found) if found.category_ids is None
                  else [{"category_id": int(category)} for category in found.category_ids])
    return [dict({"class_id": int(label), "class_name": name}, **category,
                 score=round(float(score), 6), box=[round(float(v), 2) for v in box])
            for box, score, label, name, category in zip(found.boxes, found.scores,
                                                         found.labels, found.names, categories)]


def write_text(path, text):
    """Write ``text`` to ``path`` atomically."""
    temporary = "%s.tmp-%d" % (path, os.getpid())
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def label_lines(found):
    return "".join("%s %.6f %.2f %.2f %.2f %.2f\n" % (name, score, *box)
                   for name, score, box in zip(found.names, found.scores, found.boxes))


class Writer:
    """Writes each picture's files under ``output`` on a thread pool at idle priority
    (encoding releases the GIL, so it can run beside inference): the drawn picture if
    ``pictures``, the crops if ``crops``, the text file if ``txt``. The first error is
    raised by a later :meth:`submit` or by :meth:`close`."""

    def __init__(self, output, class_names, pictures, crops, txt):
        self.output, self.pictures, self.crops, self.txt = output, pictures, crops, txt
        # idle priority, as the decoding threads: a writer preempting one of the runtime's
        # threads stalls the whole parallel pass at its next barrier
        self.pool = ThreadPoolExecutor(WRITERS, initializer=lower_priority)
        self.pending = collections.deque()
        folders = ([""] + (["pictures"] if pictures else []) + (["labels"] if txt else [])
                   + ([os.path.join("crops", name) for name in class_names] if crops else []))
        for folder in folders:
            os.makedirs(os.path.join(output, folder), exist_ok=True)

    def submit(self, name, extension, image, found):
        """Start writing the files of one picture; returns its picture's path relative to
        the output folder (None without pictures). Waits while a few batches' worth of
        pictures wait, so that kept images do not pile up in memory."""
        while self.pending and (self.pending[0].done() or len(self.pending) > MAX_WAITING):
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(self.write, name, extension, image, found))
        return os.path.join("pictures", name + extension) if self.pictures else None

    def write(self, name, extension, image, found):
        if self.pictures:
            save_image(os.path.join(self.output, "pictures", name + extension),
                       draw(image, found))
        if self.crops:
            for k, (box, class_name) in enumerate(zip(found.boxes, found.names)):
                save_image(os.path.join(self.output, "crops", class_name,
                                        "%s_%d%s" % (name, k, extension)), crop(image, box))
        if self.txt:
            write_text(os.path.join(self.output, "labels", name + ".txt"), label_lines(found))

    def close(self):
        self.pool.shutdown(wait=True)
        while self.pending:
            self.pending.popleft().result()


def describe(item, size, found, picture):
    """The results JSON entry of one picture."""
    entry = {"file": item.path}
    if item.video_frame is not None:
        entry["video_frame"] = item.video_frame
    entry.update(width=size[0], height=size[1], frame=found.frame, picture=picture,
                 detections=detection_rows(found))
    return entry


def gather_inputs(options):
    """``(inputs, skipped)`` of :func:`zoo.inference.inputs.expand_inputs` for the options'
    inputs and list files; with ``strict``, an unreadable video is a DataError. Logs what
    a named folder leaves out."""
    specs = tuple(options.inputs) + tuple(LIST_PREFIX + path for path in options.lists)
    expanded = expand_inputs(specs, options.recursive, options.every)
    for notice in expanded.left_out:
        LOG.warning(notice)
    if expanded.skipped and options.strict:
        raise DataError(expanded.skipped[0][1])
    if not expanded.inputs and not expanded.skipped:
        raise OptionsError("no images or videos in %s" % ", ".join(specs))
    return expanded.inputs, expanded.skipped


def detect(options, detector=None):
    """Detect on every input of ``options`` (a :class:`DetectOptions`) and write the
    outputs; returns a :class:`DetectSummary`. ``detector``: one already loaded (any
    :class:`zoo.inference.runner.BatchDetector`), else :func:`open_detector` of the
    options' checkpoint."""
    detector = detector or open_detector(options.checkpoint, options.epoch, options.exif)
    labels = class_filter(detector.class_names, options.classes)
    inputs, skipped = gather_inputs(options)
    for _, reason in skipped:
        LOG.warning("skipped %s", reason)
    source = InputImages(inputs, options.strict, keep=options.pictures or options.crops,
                         exif=detector.exif)
    writer = Writer(options.output, detector.class_names, options.pictures, options.crops,
                    options.txt)
    names, entries = output_names(inputs), []
    try:
        for index, rows, size in detector.runner.outputs(
                source, options.batch_size, "detecting" if options.progress else None):
            if rows is None:
                LOG.warning("skipped %s", source.errors[index])
                skipped.append((inputs[index].path, source.errors[index]))
                continue
            found = detector.detections(kept(rows, labels), size, options.threshold,
                                        options.max_detections)
            image = source.take(index) if source.keep else None
            extension = picture_extension(inputs[index], options.image_format)
            picture = writer.submit(names[index], extension, image, found)
            entries.append(describe(inputs[index], size, found, picture))
    finally:
        writer.close()
    return write_results(options, detector, entries, skipped)


def write_results(options, detector, entries, skipped):
    """Write the results JSON; returns the :class:`DetectSummary`."""
    path = os.path.join(options.output, RESULTS_FILE)
    results = {"checkpoint": options.checkpoint, "threshold": options.threshold,
               "class_names": list(detector.class_names),
               "category_ids": getattr(detector, "category_ids", None), "images": entries,
               "skipped": [{"file": file, "error": reason} for file, reason in skipped]}
    write_text(path, json.dumps(results, indent=1))
    total = sum(len(entry["detections"]) for entry in entries)
    return DetectSummary(len(entries), total, len(skipped), options.output, path)
