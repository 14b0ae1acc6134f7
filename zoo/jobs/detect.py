"""Run a detector over many pictures (files, folders, globs, list files, video frames) and
write what it found: one results JSON, drawn pictures, optionally crops and text files.

Output layout under ``output``::

    results.json            every picture of the run: file, video frame, size,
                            detections; every file not detected on (unreadable, of another
                            type, hidden), and why; the run's settings
    results.jsonl           one line per picture (its record: its results.json entry),
                            appended once its files are written, by every run into
                            ``output``, never rewritten: what a run killed at any point did
    pictures/NAME.EXT       the detections drawn, EXT the input's format or ``image_format``
    crops/CLASS/NAME_K.EXT  with ``crops``: detection K of picture NAME, cut out
    labels/NAME.txt         with ``txt``: one line per detection,
                            ``CLASS_ID CLASS_NAME SCORE X1 Y1 X2 Y2`` (pixels), the name
                            with each blank written ``_``, so that a line splits on blanks

``NAME`` and ``CLASS`` are the input's name and the class name made one safe file name
(:func:`zoo.filenames.safe_component`): no name a model file or a dataset carries can
write outside ``output``. One run writes into an ``output`` at a time (:mod:`zoo.runlock`);
an ``output`` that holds files already is refused unless ``exist_ok`` (a new run, its
records appended after the earlier ones) or ``resume``, and no input is read from inside
it. SIGINT and SIGTERM stop the run after the images being detected, with results.json
written for those finished (:class:`Stopped`); ``resume`` continues it: the inputs
recorded are skipped, the settings must be the same, and the files of pictures left
without a record are removed.

The images go through the detector's own batch runner, so results do not depend on the
batch size; pictures and crops are encoded and written on worker threads of normal
priority beside inference. Every file but results.jsonl (appended a line at a time) is
written atomically (:mod:`zoo.atomicfile`). With ``ray`` the detecting runs on a Ray cluster
(:mod:`zoo.ray.cluster`) and everything else here, as without it; there the inputs may also
be object-store URLs (``s3://bucket/prefix/``) and, from Python, a Ray Dataset, each photo
named in its record by its URL or the dataset's ``path``.
"""
import collections
import contextlib
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
from zoo.atomicfile import TEMPORARY_MARK, remove_quietly, write_text
from zoo.errors import DataError, Interrupted, OptionsError
from zoo.filenames import unique_components
from zoo.flags import (ARTIFACT_OR_DEPLOYED, REQUIRED, checkpoint_flag, comma_list,
                       data_shape_flag, data_threads_flag, epoch_flag, exif_flag, flag,
                       fraction, inference_batch_flag, max_size_flag, options_from,
                       positive_int, progress_flag, tile_overlap_flag, tiles_flag)
from zoo.checkpoint import open_detector
from zoo.inference.inputs import (LIST_PREFIX, ExpandedInputs, InputImages, Skipped,
                                  expand_inputs, is_inside, left_out_notice)
from zoo.inference.runner import MAX_DETECTIONS, SCORE_THRESHOLD
from zoo.inference.tiles import check_tile_flags, detector_outputs, run_tiling
from zoo.inference.visualize import ENCODINGS, draw, pixel_box, save_image
from zoo.progress import NoBar, progress_bar
from zoo.ray.cluster import LOCAL, ClusterInference, check_cluster, is_dataset, remote_inputs
from zoo.ray.storage import is_url
from zoo.signals import stop_signals

__all__ = ["DetectOptions", "DetectSummary", "FORMATS", "Stopped", "detect"]

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
MAX_WAITING_BYTES = 256 << 20
"""The decoded images they may hold at most: seven 4000x3000 photos (32 would hold 1.1 GB
where a fast network outruns the writers)."""
NAMED_ENTRIES = 3
"""Entries of a refused ``output`` named in the error."""
FILE_FOLDERS = ("pictures", "labels", "crops")
"""The folders of ``output`` holding the files records list."""


@dataclass(frozen=True)
class DetectOptions:
    """What ``zoo detect`` runs, on what, and what it writes: each field declares its flag
    (:mod:`zoo.flags`), but the inputs, which are its positional words."""
    checkpoint: str = checkpoint_flag(ARTIFACT_OR_DEPLOYED)  # artifact prefix, .onnx, .xml
    # files, folders, globs, @LIST files; with ray, s3:// URLs or (from Python) a Ray Dataset
    inputs: Tuple[str, ...] = REQUIRED
    output: str = flag(os.path.join("output", "detect"),
                       "folder to write into; refused if it holds files, unless --exist-ok")
    epoch: Optional[int] = epoch_flag()      # None: the best validated epoch, else the newest
    lists: Tuple[str, ...] = flag((), "text file listing inputs, one a line (repeatable)",
                                  name="--list", action="append", metavar="FILE")
    recursive: bool = flag(False, "folders: their subfolders too (symlinked ones followed, "
                                  "each once); globs: '**' matches any depth")
    every: int = flag(1, "videos: detect on every Nth frame", type=positive_int, metavar="N")
    threshold: float = flag(SCORE_THRESHOLD, "lowest score kept",  # a detector's default
                            type=fraction)
    max_detections: int = flag(MAX_DETECTIONS, "the best-scoring detections kept per picture",
                               type=positive_int)
    # tile side in pixels: run tiles too (small objects); None: the checkpoint's, 0: none
    tiles: Optional[int] = tiles_flag()
    tile_overlap: Optional[float] = tile_overlap_flag(of_checkpoint=True)  # None: as tiles
    classes: Tuple[str, ...] = flag((), "keep only these classes (default: all)",
                                    type=comma_list(str), metavar="NAME,...")
    batch_size: Optional[int] = inference_batch_flag()
    image_format: Optional[str] = flag(None, "format of the drawn pictures (default: each "
                                             "input's)", name="--format", choices=FORMATS)
    pictures: bool = flag(True, "write no drawn pictures")
    crops: bool = flag(False, "write each detection cut out, in a folder per class")
    txt: bool = flag(False, "write one text file per picture, a line per detection: CLASS_ID "
                            "CLASS_NAME SCORE X1 Y1 X2 Y2 (pixels; blanks in the name "
                            "written _)")
    strict: bool = flag(False, "stop at the first file that cannot be read (default: skip it)")
    exif: str = exif_flag()                  # "apply": photos as a viewer shows them
    data_threads: Optional[int] = data_threads_flag()  # None: half the cores, at most 4
    exist_ok: bool = flag(False, "write into an --output that holds files already (files of "
                                 "the same names are replaced; results.json lists this run's "
                                 "pictures only, results.jsonl keeps earlier runs' lines "
                                 "before them)")
    resume: bool = flag(False, "continue the run stopped in --output: skip the images "
                               "recorded in its results.jsonl (refused if a setting differs)")
    progress: bool = progress_flag()
    ray: Optional[str] = flag(  # None: detect in this process; LOCAL: a Ray started here
        None, "detect on a Ray cluster (pip install -e '.[ray]'): the one at ADDRESS (auto, "
              "HOST:PORT, ray://HOST:PORT) or, without one, a Ray started on this machine "
              "for the run; every file is written here, as without --ray; the paths must "
              "name the same files on every node", nargs="?", const=LOCAL, metavar="ADDRESS")
    ray_workers: Optional[int] = flag(None, "--ray: detectors running at once, one per Ray "
                                            "actor (default: as many as the cluster's CPUs "
                                            "hold)", type=positive_int, metavar="N")
    ray_worker_cpus: int = flag(1, "--ray: CPUs each detector takes (its OpenMP and decoding "
                                   "threads)", type=positive_int, metavar="N")
    # the input size run at (a Faster R-CNN's short side and long-side limit); None: the
    # checkpoint's
    data_shape: Optional[int] = data_shape_flag(max_size=True, of_checkpoint=True)
    max_size: Optional[int] = max_size_flag(of_checkpoint=True)

    def __post_init__(self):
        if not (self.inputs or self.lists):
            raise OptionsError("no inputs: name files, folders, globs or list files")
        if min(self.every, self.batch_size or 1, self.max_detections) < 1:
            raise OptionsError("every, batch_size and max_detections must be at least 1, got "
                               "%r, %r and %r" % (self.every, self.batch_size,
                                                 self.max_detections))
        if self.data_threads is not None and self.data_threads < 1:
            raise OptionsError("data_threads must be at least 1, got %r" % self.data_threads)
        if not 0.0 <= self.threshold <= 1.0:
            raise OptionsError("threshold must be in [0, 1], got %r" % self.threshold)
        check_tile_flags(self.tiles, self.tile_overlap)  # refused here, before the slow part
        if self.image_format not in (None,) + FORMATS:
            raise OptionsError("image_format must be one of %s, got %r"
                               % (", ".join(FORMATS), self.image_format))
        check_cluster(self.ray, self.ray_workers, self.ray_worker_cpus)
        remote = next((spec for spec in self.inputs if is_dataset(spec) or is_url(spec)), None)
        if remote is not None and self.ray is None:
            raise OptionsError("input %s: %s is read on a Ray cluster: add --ray" % (
                "a Ray Dataset" if is_dataset(remote) else remote,
                "a dataset" if is_dataset(remote) else "an object-store URL"))

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo detect``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


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


def output_names(inputs, taken=()):
    """A file-name stem per input, safe and unique in the output folder: the file's stem,
    the video frame appended, ``-2``, ``-3``... where two inputs share one, or one is
    ``taken`` already (:func:`zoo.filenames.unique_components`)."""
    stems = []
    for item in inputs:
        stem = os.path.splitext(os.path.basename(item.path))[0]
        if item.video_frame is not None:
            stem = "%s_frame%06d" % (stem, item.video_frame)
        stems.append(stem)
    return unique_components(stems, taken)


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
        size = 0 if image is None else image.nbytes
        self.drain(MAX_WAITING, MAX_WAITING_BYTES - size)
        self.pending.append((self.pool.submit(self.write, files, image, found), entry, size))

    def drain(self, waiting, waiting_bytes=None):
        """Record the pictures written, in order, waiting while more than ``waiting``
        wait, or their images hold more than ``waiting_bytes``."""
        held = sum(size for _, _, size in self.pending)
        while self.pending and (self.pending[0][0].done() or len(self.pending) > waiting
                                or (waiting_bytes is not None and held > waiting_bytes)):
            future, entry, size = self.pending.popleft()
            held -= size
            future.result()
            self.record(entry)

    def write(self, files, image, found):
        """Write one picture's files; one failing removes those written before it, which no
        record would list."""
        written = []
        try:
            for path, write in file_writes(files, image, found):
                write(os.path.join(self.output, path))
                written.append(path)
        except BaseException:
            for path in written:
                remove_quietly(os.path.join(self.output, path))
            raise

    def close(self):
        """Wait for every write; record those written; raise the first error."""
        self.pool.shutdown(wait=True)
        error = None
        while self.pending:
            future, entry, _ = self.pending.popleft()
            if future.exception() is None:
                self.record(entry)
            else:
                error = error or future.exception()
        if error is not None:
            raise error


def file_writes(files, image, found):
    """``(path, write(full_path))`` for each of one picture's :class:`PictureFiles`."""
    if files.picture:
        yield files.picture, lambda path: save_image(path, draw(image, found))
    for name, box in zip(files.crops, found.boxes):
        yield name, lambda path, box=box: save_image(path, crop(image, box))
    if files.labels:
        # As pictures are (zoo.inference.visualize.save_image): not flushed one by one.
        yield files.labels, lambda path: write_text(path, label_lines(found), durable=False)


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
    """``(expanded, dataset)``: the :class:`zoo.inference.inputs.ExpandedInputs` of the
    options' inputs and list files, the output folder left out, and the Ray Dataset among
    them (None: none; :func:`zoo.ray.cluster.remote_inputs`); with ``strict``, an unreadable
    video is a DataError. Logs what a named folder leaves out and warns of each note."""
    remote = [spec for spec in options.inputs if is_dataset(spec) or is_url(spec)]
    specs = tuple(spec for spec in options.inputs
                  if not (is_dataset(spec) or is_url(spec))) + tuple(
        LIST_PREFIX + path for path in options.lists)
    expanded = expand_inputs(specs, options.recursive, options.every, options.output)
    dataset = None
    if remote:  # listed after the files, as they are named
        inputs, left_out, dataset = remote_inputs(remote, options.recursive)
        notices = [left_out_notice(url, [item for item in left_out
                                         if item.file.startswith(url.rstrip("/") + "/")])
                   for url in remote if not is_dataset(url)]
        expanded = ExpandedInputs(expanded.inputs + inputs, expanded.skipped + left_out,
                                  expanded.left_out + [line for line in notices if line],
                                  expanded.notes)
        specs += tuple("a Ray Dataset" if is_dataset(spec) else spec for spec in remote)
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
    return expanded, dataset


def check_output(output, exist_ok, resume):
    """Refuse an ``output`` that is not a folder, or that holds anything but a run's lock
    file unless ``exist_ok`` or ``resume``: a second run would mix its pictures with the
    first's. ``resume`` needs the results.json of the run it continues there (into an
    empty ``output`` it is a first run)."""
    if os.path.exists(output) and not os.path.isdir(output):
        raise OptionsError("--output %s is not a folder; name a folder to write into" % output)
    entries = sorted(set(os.listdir(output)) - {LOCK_FILE}) if os.path.isdir(output) else []
    if not entries or (exist_ok and not resume):
        return
    if resume and RESULTS_FILE not in entries:
        raise OptionsError("--resume: --output %s holds no run to continue (no %s); name the "
                           "--output of the run to continue" % (output, RESULTS_FILE))
    if not resume:
        more = len(entries) - NAMED_ENTRIES
        raise OptionsError(
            "--output %s holds files already (%s%s); continue the run there with --resume, "
            "name a new folder, or pass --exist-ok to write into it (files of the same names "
            "are replaced)" % (output, ", ".join(entries[:NAMED_ENTRIES]),
                               " and %d more" % more if more > 0 else ""))


def run_settings(options, detector, tiles):
    """What decides a run's records, as results.json records it (``tiles``: the tiling run,
    :func:`run_tiles`): a run continues (``resume``) only with the same."""
    return {"checkpoint": os.path.realpath(options.checkpoint),
            "epoch": getattr(detector, "epoch", None),
            "class_names": list(detector.class_names), "threshold": options.threshold,
            "max_detections": options.max_detections, "classes": list(options.classes),
            "every": options.every, "exif": options.exif,
            "image_format": options.image_format, "pictures": options.pictures,
            "crops": options.crops, "txt": options.txt, **tile_settings(tiles),
            # only where chosen: a run at the checkpoint's size continues one from before
            **({"data_shape": detector.preprocessing["data_shape"]}
               if options.data_shape or options.max_size else {})}


def tile_settings(tiles):
    """The tiling of a run as its settings record it: None for an untiled run, as a run
    recorded before tiles existed reads."""
    return {"tiles": tiles and tiles.size, "tile_overlap": tiles and tiles.overlap}


def run_tiles(options, detector):
    """The :class:`~zoo.inference.tiles.Tiling` the run runs (:func:`run_tiling`): the
    options', else the tiles the checkpoint was trained on, which the log's first line
    then names with the way to run whole photos only."""
    tiles = run_tiling(options.tiles, options.tile_overlap, detector.tiles)
    if options.tiles is None and tiles is not None:
        LOG.info("detecting in %d-pixel tiles overlapping %g beside the whole photo, as %s "
                 "was trained (--tiles 0: whole photos only; --tiles SIZE: other tiles)",
                 tiles.size, tiles.overlap, options.checkpoint)
    return tiles


def earlier_records(path):
    """Every record of the results.jsonl at ``path``, oldest first ([] where there is
    none). A last line cut short (a run killed while writing it, a full disk) is no
    record: it is cut off the file, so that the next record starts a line of its own."""
    if os.path.islink(path):  # not a file a run wrote: replaced, never followed
        os.remove(path)
    if not os.path.exists(path):
        return []
    with open(path, "rb") as stream:
        data = stream.read()
    whole = data[:data.rfind(b"\n") + 1]
    if len(whole) < len(data):
        os.truncate(path, len(whole))
    records = []
    for number, line in enumerate(whole.splitlines(), 1):
        try:
            records.append(json.loads(line))
        except ValueError as err:
            raise DataError("%s: line %d is not a record (%s); move the file away, or name "
                            "a new --output" % (path, number, err)) from None
    return records


def first_record(options, settings, records):
    """The line of results.jsonl (from 1) holding the run's first record: the line after
    the ``records`` of earlier runs, or with ``resume`` the run's own first, its settings
    checked against ``settings``."""
    path = os.path.join(options.output, RESULTS_FILE)
    if not (options.resume and os.path.exists(path)):
        return len(records) + 1
    with open(path, encoding="utf-8") as stream:
        try:
            earlier = json.load(stream)
        except ValueError as err:
            raise DataError("--resume: %s is damaged (%s); name a new --output"
                            % (path, err)) from None
    if "settings" not in earlier or "first_record" not in earlier:
        raise OptionsError("--resume: %s records no settings (a zoo detect before --resume "
                           "wrote it); name a new --output" % path)
    check_settings(path, earlier["settings"], settings)
    if earlier["first_record"] > len(records) + 1:
        raise DataError("--resume: the run's records start at line %d of %s, which has %d; "
                        "name a new --output" % (earlier["first_record"], LINES_FILE,
                                                 len(records)))
    return earlier["first_record"]


def check_settings(path, recorded, settings):
    """Refuse to continue a run whose ``recorded`` settings are not ``settings``: its records
    and this run's would mean different things."""
    differing = [key for key, value in settings.items() if recorded.get(key) != value]
    if differing:
        key = differing[0]
        more = " (and %s)" % ", ".join(differing[1:]) if differing[1:] else ""
        raise OptionsError("--resume: the run in %s has %s %s, this one %s%s; continue it "
                           "with the same settings, or name a new --output" % (
                               path, key, json.dumps(recorded.get(key)),
                               json.dumps(settings[key]), more))


def record_files(record):
    """The files of one record, relative to the output folder."""
    return ([path for path in (record.get("picture"), record.get("labels")) if path]
            + [row["crop"] for row in record["detections"] if "crop" in row])


def record_names(record):
    """The file-name stems one record's files use (``NAME`` of ``crops/CLASS/NAME_K.EXT``
    too)."""
    names = {os.path.splitext(os.path.basename(path))[0]
             for path in (record.get("picture"), record.get("labels")) if path}
    names.update(re.sub(r"_\d+$", "", os.path.splitext(os.path.basename(row["crop"]))[0])
                 for row in record["detections"] if "crop" in row)
    return names


def source_key(path, video_frame):
    """What tells one input from another: its real path and video frame; a name no file
    here has (an object-store URL, a Ray Dataset's ``path``) as it is."""
    return (os.path.realpath(path) if not is_url(path) and os.path.exists(path) else path,
            video_frame)


def detect(options, detector=None):
    """Detect on every input of ``options`` (a :class:`DetectOptions`) and write the
    outputs; returns a :class:`DetectSummary`. ``detector``: one already loaded (any
    :class:`zoo.inference.runner.BatchDetector`), else :func:`zoo.open_detector` of the
    options' checkpoint. With ``ray``, the detector runs on a Ray cluster
    (:mod:`zoo.ray.cluster`) and this process writes what it finds, as it writes its own.

    SIGINT or SIGTERM (in the main thread) stops the run once the images being detected
    are written, with :class:`Stopped`; a second one stops it at once (results.jsonl still
    lists every picture written). ``resume`` continues it."""
    # Before the slow part: refused at once.
    check_output(options.output, options.exist_ok, options.resume)
    with stop_signals(stopped_before_detecting):
        detector = detector or open_detector(options.checkpoint, options.epoch,
                                             data_threads=options.data_threads,
                                             exif=options.exif, data_shape=options.data_shape,
                                             max_size=options.max_size)
        tiles = run_tiles(options, detector)
        labels = class_filter(detector.class_names, options.classes)
        expanded, dataset = gather_inputs(options)
        infer = None  # this process's runner
        if options.ray is not None:  # a cluster's: what it refuses, before anything is written
            infer = ClusterInference(options.ray, options.ray_workers, options.ray_worker_cpus,
                                     dataset)
            infer.check_inputs(expanded.inputs)
        with runlock.hold(os.path.join(options.output, LOCK_FILE),
                          "--output folder %s" % options.output):
            # A run may have ended meanwhile.
            check_output(options.output, options.exist_ok, options.resume)
            settings = run_settings(options, detector, tiles)
            records = earlier_records(os.path.join(options.output, LINES_FILE))
            first = first_record(options, settings, records)
            return DetectRun(options.output, detector, labels, expanded, settings, records,
                             first, tiles, infer).run(options)


def local_outputs(detector, source, options, tiles):
    """``(index, rows, (width, height))`` of every input of ``source`` (an
    :class:`~zoo.inference.inputs.InputImages`), in order, by ``detector``'s own batch
    runner in this process, in ``tiles`` (None: whole pictures only; rows and size None for
    an input it could not read, its error in ``source.errors``)."""
    return detector_outputs(detector.runner, source, options.batch_size, tiles,
                            options.threshold)


def stopped_before_detecting(signum):
    """SIGINT or SIGTERM while the detector loads or the inputs are listed: nothing is
    written yet, so the run stops at once."""
    raise Interrupted(signum, "stopped by %s before detecting; nothing written"
                      % signal.Signals(signum).name)


class Stopped(Interrupted):
    """A signal stopped :func:`detect` once it had begun writing: every picture written has
    its record, and ``resume`` continues the run (``zoo detect --resume``)."""


class DetectRun:
    """One run of :func:`detect` on its expanded inputs, under the lock of its ``output``
    folder: ``records``, results.jsonl's, the run's own from line ``first`` on (those of the
    run it continues, with ``resume``); ``tiles``: the tiling it runs (None: none). Its
    options are handed to :meth:`run`, which passes them on, so that a reader (and
    ``farm-studio walk``) follows a flag from the command line to its use."""

    def __init__(self, output, detector, labels, expanded, settings, records, first,
                 tiles=None, infer=None):
        # infer: what runs the detector over the inputs, as local_outputs (None) does
        self.output, self.detector, self.labels, self.tiles = output, detector, labels, tiles
        self.infer = infer or local_outputs
        self.settings, self.records, self.first = settings, records, first
        self.skipped = list(expanded.skipped)
        self.entries = records[first - 1:]
        done = {source_key(entry["file"], entry.get("video_frame")) for entry in self.entries}
        self.inputs = [item for item in expanded.inputs
                       if source_key(item.path, item.video_frame) not in done]
        self.total = len(self.entries) + len(self.inputs)
        self.stop = self.lines = self.bar = None

    def run(self, options):
        """Detect and write (:meth:`detect_all`) under the stop signals; the summary, or
        :class:`Stopped`."""
        try:
            with stop_signals(self.on_signal):
                if options.resume:
                    self.remove_unrecorded()
                self.write_results(options, complete=False)  # the settings, before any record
                with open(os.path.join(options.output, LINES_FILE), "a",
                          encoding="utf-8") as lines:
                    self.lines = lines
                    self.detect_all(options)
        except Stopped as err:  # a second signal
            raise self.stopped(err.signum, "stopped at once by a second %s", LINES_FILE,
                               "lists them") from None
        if self.stop is not None:
            raise self.stopped(self.stop, "stopped by %s", RESULTS_FILE,
                               "holds their results")
        return self.summary()

    def stopped(self, signum, how, file, holds):
        """The :class:`Stopped` saying how many images are written and where."""
        return Stopped(signum, "%s with %d of %d images written; %s %s" % (
            how % signal.Signals(signum).name, len(self.entries), self.total,
            os.path.join(self.output, file), holds))

    def on_signal(self, signum):
        if self.stop is not None:  # a second one: the user does not want to wait
            raise Stopped(signum, "")
        self.stop = signum

    def remove_unrecorded(self):
        """Remove the files of ``output`` no record lists: those of pictures whose record a
        run stopped at once (a second signal, SIGKILL) never wrote, and the temporary files
        of a write it cut short."""
        output = self.output
        listed = {os.path.normpath(path) for record in self.records
                  for path in record_files(record)}
        unlisted = [os.path.join(output, name) for name in os.listdir(output)
                    if name.startswith(RESULTS_FILE + TEMPORARY_MARK)]
        for folder in FILE_FOLDERS:
            top = os.path.join(output, folder)
            if not is_inside(top, os.path.realpath(output)):
                continue  # a link out of output: never followed (the Writer refuses it)
            unlisted += [os.path.join(parent, name) for parent, _, names in os.walk(top)
                         for name in names
                         if os.path.relpath(os.path.join(parent, name), output) not in listed]
        for path in unlisted:
            os.remove(path)
        if unlisted:
            LOG.info("removed %d file(s) of %s no record lists (the run stopped before "
                     "their pictures' records were written)", len(unlisted), output)

    def record(self, entry):
        """Keep one picture's entry, its files written: a line of results.jsonl at once."""
        self.lines.write(json.dumps(entry) + "\n")
        self.lines.flush()
        self.entries.append(entry)
        self.bar.update()

    def detect_all(self, options):
        """Detect and write every input not recorded yet (until a signal); results.json is
        written however this ends. The progress bar counts the pictures recorded (and the
        files skipped), from those the run had recorded before."""
        detector = self.detector
        # Drawn pictures and tiles need every photo whole; crops only those with
        # detections: the others are decoded at the size the network takes (DCT scaling of
        # large JPEGs).
        whole = options.pictures or self.tiles is not None
        source = InputImages(self.inputs, options.strict,
                             keep=options.pictures or options.crops, exif=detector.exif,
                             decode_for=None if whole else detector.preprocessing)
        writer = Writer(options.output, detector.class_names, options.pictures, options.crops,
                        options.txt, self.record)
        names = output_names(self.inputs, taken={name for entry in self.entries
                                                 for name in record_names(entry)})
        self.bar = (progress_bar(total=self.total, initial=len(self.entries),
                                 desc="detecting", unit="image")
                    if options.progress else NoBar())
        complete = finished = False
        try:
            # closed at once on a stop: the images it prepares ahead, or a cluster's work,
            # are not waited for
            with contextlib.closing(self.infer(detector, source, options, self.tiles)) as outputs:
                for index, rows, size in outputs:
                    if rows is None:
                        item = Skipped(self.inputs[index].path, "unreadable",
                                       source.errors[index])
                        LOG.warning("skipped %s", item.error)
                        self.skipped.append(item)
                        self.bar.update()
                    else:
                        self.detected(options, writer, source, index, rows, size,
                                      names[index])
                    if self.stop is not None:
                        break
            finished = self.stop is None
        finally:
            try:
                writer.close()
                complete = finished  # and every picture's files written
            finally:
                self.bar.close()
                self.write_results(options, complete)

    def detected(self, options, writer, source, index, rows, size, name):
        """Hand one picture's detections to the writer."""
        item = self.inputs[index]
        found = self.detector.detections(kept(rows, self.labels), size, options.threshold,
                                         options.max_detections)
        image = (source.take(index, wanted=options.pictures or len(found) > 0)
                 if source.keep else None)
        files = writer.files(name, picture_extension(item, options.image_format), found)
        writer.submit(files, image, found, describe(item, size, found, files))

    def write_results(self, options, complete):
        """Write results.json (atomically): the run's settings and every picture it
        recorded so far."""
        results = {"checkpoint": options.checkpoint, "threshold": options.threshold,
                   "class_names": list(self.detector.class_names),
                   "category_ids": getattr(self.detector, "category_ids", None),
                   "settings": self.settings, "first_record": self.first,
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
                             unreadable, self.output,
                             os.path.join(self.output, RESULTS_FILE),
                             len(self.skipped) - unreadable)
