"""Run a detector over many pictures (files, folders, globs, list files, video frames) and
write what it found: one results JSON, drawn pictures, optionally crops and text files.

Output layout under ``output``::

    results.json            every picture: file, video frame, size, detections; every file
                            not detected on (unreadable, of another type, hidden), and why
    results.jsonl           one line per picture, written as each finishes (its
                            results.json entry): what a run killed at any point had done
    pictures/NAME.EXT       the detections drawn, EXT the input's format or ``image_format``
    crops/CLASS/NAME_K.EXT  with ``crops``: detection K of picture NAME, cut out
    labels/NAME.txt         with ``txt``: one line per detection,
                            ``CLASS_ID CLASS_NAME SCORE X1 Y1 X2 Y2`` (pixels), the name
                            with each blank written ``_``, so that a line splits on blanks

``NAME`` and ``CLASS`` are the input's name and the class name made one safe file name
(:func:`zoo.filenames.safe_component`): no name a model file or a dataset carries can
write outside ``output``. One run writes into an ``output`` at a time (:mod:`zoo.runlock`);
an ``output`` that holds files already is refused unless ``exist_ok``, and no input is read
from inside it. SIGINT and SIGTERM stop the run after the images being detected, with
results.json written for those finished (:class:`zoo.errors.Interrupted`).

The images go through the detector's own batch runner, so results do not depend on the
batch size; pictures and crops are encoded and written on worker threads of normal
priority beside inference. Every file but results.jsonl (appended a line at a time) is
written atomically (:mod:`zoo.atomicfile`).
"""
import collections
import json
import logging
import os
import re
import signal
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from zoo import runlock
from zoo.atomicfile import write_text
from zoo.errors import DataError, Interrupted, OptionsError
from zoo.filenames import unique_components
from zoo.checkpoint import open_detector
from zoo.inference.inputs import LIST_PREFIX, InputImages, Skipped, expand_inputs, is_inside
from zoo.inference.visualize import ENCODINGS, draw, pixel_box, save_image
from zoo.signals import stop_signals

__all__ = ["DetectOptions", "DetectSummary", "FORMATS", "detect"]

LOG = logging.getLogger(__name__)
RESULTS_FILE = "results.json"
LINES_FILE = "results.jsonl"
LOCK_FILE = "detect.lock"
"""The lock file of a run, inside ``output`` (the only file an ``output`` may hold)."""
FORMATS = ("png", "jpg")
VIDEO_PICTURE_EXTENSION = ".jpg"
WRITERS = 2
"""Threads encoding and writing pictures: one keeps up with inference on most graphs, two
absorb a slow disk."""
MAX_WAITING = 32
"""Pictures waiting to be written before detection waits for them (their decoded images
are held in memory)."""
NAMED_ENTRIES = 3
"""Entries of a refused ``output`` named in the error."""


@dataclass(frozen=True)
class DetectOptions:
    checkpoint: str                          # artifact prefix (any precision), .onnx, .xml
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
    data_threads: Optional[int] = None       # decoding images; None: half the cores, at most 4
    exist_ok: bool = False                   # write into an output that holds files already
    progress: bool = True

    def __post_init__(self):
        if not (self.inputs or self.lists):
            raise OptionsError("no inputs: name files, folders, globs or list files")
        if min(self.every, self.batch_size, self.max_detections) < 1:
            raise OptionsError("every, batch_size and max_detections must be at least 1, got "
                               "%r, %r and %r" % (self.every, self.batch_size,
                                                 self.max_detections))
        if self.data_threads is not None and self.data_threads < 1:
            raise OptionsError("data_threads must be at least 1, got %r" % self.data_threads)
        if not 0.0 <= self.threshold <= 1.0:
            raise OptionsError("threshold must be in [0, 1], got %r" % self.threshold)
        if self.image_format not in (None,) + FORMATS:
            raise OptionsError("image_format must be one of %s, got %r"
                               % (", ".join(FORMATS), self.image_format))


@dataclass(frozen=True)
class DetectSummary:
    images: int            # pictures detected on (video frames count one each)
    detections: int
    skipped: int           # files that could not be read
    output: str            # the output folder
    results: str           # the results JSON file
    left_out: int = 0      # files and folders a folder or glob left out (type, hidden, ...)

    def __str__(self):
        left_out = ", %d left out" % self.left_out if self.left_out else ""
        return ("%d images, %d detections, %d skipped%s; results in %s"
                % (self.images, self.detections, self.skipped, left_out, self.output))


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
    """A file-name stem per input, safe and unique in the output folder: the file's stem,
    the video frame appended, ``-2``, ``-3``... where two inputs share one
    (:func:`zoo.filenames.unique_components`)."""
    stems = []
    for item in inputs:
        stem = os.path.splitext(os.path.basename(item.path))[0]
        if item.video_frame is not None:
            stem = "%s_frame%06d" % (stem, item.video_frame)
        stems.append(stem)
    return unique_components(stems)


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


def detection_rows(found, crops=None):
    """The detections as JSON objects (with their COCO ``category_id`` where the detector
    has COCO ids); ``crops``: each one's crop file, if any."""
    categories = ([{}] * len(found) if found.category_ids is None
                  else [{"category_id": int(category)} for category in found.category_ids])
    rows = [dict({"class_id": int(label), "class_name": name}, **category,
                 score=round(float(score), 6), box=[round(float(v), 2) for v in box])
            for box, score, label, name, category in zip(found.boxes, found.scores,
                                                         found.labels, found.names, categories)]
    for row, path in zip(rows, crops or ()):
        row["crop"] = path
    return rows


def label_token(name):
    """A class name as one blank-free word of a labels line: each blank (space, tab, line
    break) written ``_``, an empty name ``_``."""
    return re.sub(r"\s", "_", name) or "_"


def label_lines(found):
    """The labels file of one picture: ``CLASS_ID CLASS_NAME SCORE X1 Y1 X2 Y2`` a line."""
    return "".join("%d %s %.6f %.2f %.2f %.2f %.2f\n" % (label, label_token(name), score, *box)
                   for label, name, score, box in zip(found.labels, found.names, found.scores,
                                                      found.boxes))


@dataclass(frozen=True)
class PictureFiles:
    """What one picture writes, paths relative to the output folder (None: not written):
    the drawn ``picture``, its ``labels`` text file, a ``crops`` path per detection."""
    picture: Optional[str]
    labels: Optional[str]
    crops: tuple


class Writer:
    """Writes each picture's :class:`PictureFiles` under ``output`` on a thread pool
    (encoding releases the GIL, so it runs beside inference), and hands each picture's
    results entry to ``record`` once its files are written, in input order. An error
    writing is raised by a later :meth:`submit` or by :meth:`close`."""

    def __init__(self, output, class_names, pictures, crops, txt, record):
        self.output, self.pictures, self.crops, self.txt = output, pictures, crops, txt
        self.record = record
        # A class's folder: its name made a safe, unique file name (a model file is data).
        self.class_folders = [os.path.join("crops", folder)
                              for folder in unique_components(class_names)]
        self.pool = ThreadPoolExecutor(WRITERS)
        self.pending = collections.deque()
        folders = ((["pictures"] if pictures else []) + (["labels"] if txt else [])
                   + (self.class_folders if crops else []))
        for folder in folders:
            path = os.path.join(output, folder)
            os.makedirs(path, exist_ok=True)
            if not is_inside(path, os.path.realpath(output)):
                raise OptionsError("%s leads outside --output %s (a link?); name another "
                                   "--output" % (path, output))

    def files(self, name, extension, found):
        """The :class:`PictureFiles` of picture ``name`` (a safe file-name stem)."""
        crops = tuple(os.path.join(self.class_folders[label], "%s_%d%s" % (name, k, extension))
                      for k, label in enumerate(found.labels)) if self.crops else ()
        return PictureFiles(
            os.path.join("pictures", name + extension) if self.pictures else None,
            os.path.join("labels", name + ".txt") if self.txt else None, crops)

    def submit(self, files, image, found, entry):
        """Start writing one picture's ``files``; ``entry`` is recorded once they are
        written. Waits while a few batches' worth of pictures wait, so that kept images do
        not pile up in memory."""
        self.drain(MAX_WAITING)
        self.pending.append((self.pool.submit(self.write, files, image, found), entry))

    def drain(self, waiting):
        """Record the pictures written, in order, waiting while more than ``waiting``
        wait."""
        while self.pending and (self.pending[0][0].done() or len(self.pending) > waiting):
            future, entry = self.pending.popleft()
            future.result()
            self.record(entry)

    def write(self, files, image, found):
        if files.picture:
            save_image(os.path.join(self.output, files.picture), draw(image, found))
        for path, box in zip(files.crops, found.boxes):
            save_image(os.path.join(self.output, path), crop(image, box))
        if files.labels:
            write_text(os.path.join(self.output, files.labels), label_lines(found))

    def close(self):
        """Wait for every write; record those written; raise the first error."""
        self.pool.shutdown(wait=True)
        error = None
        while self.pending:
            future, entry = self.pending.popleft()
            if future.exception() is None:
                self.record(entry)
            else:
                error = error or future.exception()
        if error is not None:
            raise error


def describe(item, size, found, files):
    """The results JSON entry of one picture."""
    entry = {"file": item.path}
    if item.video_frame is not None:
        entry["video_frame"] = item.video_frame
    entry.update(width=size[0], height=size[1], frame=found.frame, picture=files.picture)
    if files.labels:
        entry["labels"] = files.labels
    entry["detections"] = detection_rows(found, files.crops)
    return entry


def gather_inputs(options):
    """The :class:`zoo.inference.inputs.ExpandedInputs` of the options' inputs and list
    files, the output folder left out; with ``strict``, an unreadable video is a DataError.
    Logs what a named folder leaves out and warns of each note."""
    specs = tuple(options.inputs) + tuple(LIST_PREFIX + path for path in options.lists)
    expanded = expand_inputs(specs, options.recursive, options.every, options.output)
    for notice in expanded.left_out:
        LOG.warning(notice)
    for note in expanded.notes:
        warnings.warn(note)
    unreadable = [item for item in expanded.skipped if item.reason == "unreadable"]
    if unreadable and options.strict:
        raise DataError(unreadable[0].error)
    if not expanded.inputs and not unreadable:
        raise OptionsError("no images or videos in %s" % ", ".join(specs))
    for item in unreadable:
        LOG.warning("skipped %s", item.error)
    return expanded


def check_output(output, exist_ok):
    """Refuse an ``output`` that is not a folder, or that holds anything but a run's lock
    file unless ``exist_ok``: a second run would mix its pictures with the first's and
    replace its results."""
    if os.path.exists(output) and not os.path.isdir(output):
        raise OptionsError("--output %s is not a folder; name a folder to write into" % output)
    entries = sorted(set(os.listdir(output)) - {LOCK_FILE}) if os.path.isdir(output) else []
    if entries and not exist_ok:
        more = len(entries) - NAMED_ENTRIES
        raise OptionsError(
            "--output %s holds files already (%s%s); name a new folder, or pass --exist-ok "
            "to write into it (files of the same names are replaced)" % (
                output, ", ".join(entries[:NAMED_ENTRIES]),
                " and %d more" % more if more > 0 else ""))


def detect(options, detector=None):
    """Detect on every input of ``options`` (a :class:`DetectOptions`) and write the
    outputs; returns a :class:`DetectSummary`. ``detector``: one already loaded (any
    :class:`zoo.inference.runner.BatchDetector`), else :func:`zoo.open_detector` of the
    options' checkpoint.

    SIGINT or SIGTERM (in the main thread) stops the run once the images being detected
    are written, with :class:`zoo.errors.Interrupted`; a second one stops it at once
    (results.jsonl still lists every picture written)."""
    check_output(options.output, options.exist_ok)  # before the slow part: refused at once
    with stop_signals(stopped_before_detecting):
        detector = detector or open_detector(options.checkpoint, options.epoch,
                                             data_threads=options.data_threads,
                                             exif=options.exif)
        labels = class_filter(detector.class_names, options.classes)
        expanded = gather_inputs(options)
        with runlock.hold(os.path.join(options.output, LOCK_FILE),
                          "--output folder %s" % options.output):
            check_output(options.output, options.exist_ok)  # a run may have ended meanwhile
            return DetectRun(options, detector, labels, expanded).run()


def stopped_before_detecting(signum):
    """SIGINT or SIGTERM while the detector loads or the inputs are listed: nothing is
    written yet, so the run stops at once."""
    raise Interrupted(signum, "stopped by %s before detecting; nothing written"
                      % signal.Signals(signum).name)


class DetectRun:
    """One run of :func:`detect` on its expanded inputs, under its output's lock."""

    def __init__(self, options, detector, labels, expanded):
        self.options, self.detector, self.labels = options, detector, labels
        self.inputs, self.skipped = expanded.inputs, list(expanded.skipped)
        self.entries, self.stop = [], None
        self.lines = None

    def run(self):
        options = self.options
        with stop_signals(self.on_signal):
            self.write_results(complete=False)  # an earlier run's results are not this one's
            path = os.path.join(options.output, LINES_FILE)
            if os.path.lexists(path):  # an earlier run's (a link is replaced, never followed)
                os.remove(path)
            with open(path, "w", encoding="utf-8") as lines:
                self.lines = lines
                self.detect_all()
        if self.stop is not None:
            raise Interrupted(self.stop, "stopped by %s after %d of %d images; their results "
                                         "are in %s" % (
                                             signal.Signals(self.stop).name, len(self.entries),
                                             len(self.inputs),
                                             os.path.join(options.output, RESULTS_FILE)))
        return self.summary()

    def on_signal(self, signum):
        if self.stop is not None:  # a second one: the user does not want to wait
            raise Interrupted(signum, "stopped at once by a second %s; %s lists the %d "
                                      "images written" % (
                                          signal.Signals(signum).name,
                                          os.path.join(self.options.output, LINES_FILE),
                                          len(self.entries)))
        self.stop = signum

    def record(self, entry):
        """Keep one picture's entry, its files written: in results.jsonl at once."""
        self.entries.append(entry)
        self.lines.write(json.dumps(entry) + "\n")
        self.lines.flush()

    def detect_all(self):
        """Detect and write every input (until a signal); results.json is written however
        this ends."""
        options, detector = self.options, self.detector
        source = InputImages(self.inputs, options.strict,
                             keep=options.pictures or options.crops, exif=detector.exif)
        writer = Writer(options.output, detector.class_names, options.pictures, options.crops,
                        options.txt, self.record)
        names, complete = output_names(self.inputs), False
        try:
            for index, rows, size in detector.runner.outputs(
                    source, options.batch_size, "detecting" if options.progress else None):
                if rows is None:
                    item = Skipped(self.inputs[index].path, "unreadable", source.errors[index])
                    LOG.warning("skipped %s", item.error)
                    self.skipped.append(item)
                else:
                    self.detected(writer, source, index, rows, size, names[index])
                if self.stop is not None:
                    break
            complete = self.stop is None
        finally:
            try:
                writer.close()
            finally:
                self.write_results(complete)

    def detected(self, writer, source, index, rows, size, name):
        """Hand one picture's detections to the writer."""
        options, item = self.options, self.inputs[index]
        found = self.detector.detections(kept(rows, self.labels), size, options.threshold,
                                         options.max_detections)
        image = source.take(index) if source.keep else None
        files = writer.files(name, picture_extension(item, options.image_format), found)
        writer.submit(files, image, found, describe(item, size, found, files))

    def write_results(self, complete):
        """Write results.json (atomically) with every picture recorded so far."""
        options = self.options
        results = {"checkpoint": options.checkpoint, "threshold": options.threshold,
                   "class_names": list(self.detector.class_names),
                   "category_ids": getattr(self.detector, "category_ids", None),
                   "complete": complete,
                   "images": self.entries,
                   "skipped": [{"file": item.file, "reason": item.reason, "error": item.error}
                               for item in self.skipped]}
        if self.stop is not None:
            results["stopped_by"] = signal.Signals(self.stop).name
        write_text(os.path.join(options.output, RESULTS_FILE), json.dumps(results, indent=1))

    def summary(self):
        unreadable = sum(item.reason == "unreadable" for item in self.skipped)
        return DetectSummary(len(self.entries),
                             sum(len(entry["detections"]) for entry in self.entries),
                             unreadable, self.options.output,
                             os.path.join(self.options.output, RESULTS_FILE),
                             len(self.skipped) - unreadable)
