"""What ``zoo detect`` runs on: image files, folders, globs, list files and videos, turned
into one list of :class:`Input` s and read as a source of the one batch runner
(:class:`InputImages`); loads no MXNet.

A file that cannot be read is skipped, not fatal, unless asked: a folder of photos often holds
one broken or foreign file, and a user wants the others detected and the bad one named.
"""
import collections
import glob
import os
import threading
from dataclasses import dataclass
from typing import Optional

import cv2

from zoo.errors import DataError, OptionsError
from zoo.inference.runner import rgb_image

__all__ = ["ExpandedInputs", "IMAGE_EXTENSIONS", "VIDEO_EXTENSIONS", "Input", "InputImages",
           "expand_inputs"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
"""Files a folder contributes as images (any case)."""
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".m4v", ".webm", ".mpg", ".mpeg")
"""Files read as videos, every Nth frame (any case), whether named or found in a folder."""
LIST_PREFIX = "@"
"""``@FILE`` names a text file listing inputs, one a line."""


@dataclass(frozen=True)
class Input:
    """One picture to detect on: the file ``path``, or frame ``video_frame`` of that video."""
    path: str
    video_frame: Optional[int] = None


def is_video(path):
    return path.lower().endswith(VIDEO_EXTENSIONS)


def folder_entries(folder, recursive):
    """Every entry of ``folder`` (and of its subfolders if ``recursive``, hidden ones such as
    ``.git/`` or ``.thumbnails/`` left unsearched, as ``glob`` leaves them), as paths."""
    if not recursive:
        return [os.path.join(folder, name) for name in os.listdir(folder)]
    entries = []
    for root, folders, names in os.walk(folder):
        folders[:] = [name for name in folders if not name.startswith(".")]
        entries += [os.path.join(root, name) for name in names + folders]
    return entries


def is_input_name(path):
    """Whether a folder contributes the file ``path``: an image or video extension."""
    return path.lower().endswith(IMAGE_EXTENSIONS + VIDEO_EXTENSIONS)


@dataclass(frozen=True)
class FolderScan:
    """What one listing of a folder gives: ``files``, its images and videos (sorted), and
    ``notice``, the line saying what it leaves out (None if nothing)."""
    files: tuple
    notice: Optional[str]


def scan_folder(folder, recursive):
    """The :class:`FolderScan` of ``folder`` (and its subfolders if ``recursive``). Left out
    are its files of other types, counted by extension (a phone's ``.HEIC`` photos among
    them), its hidden images and videos (the ``._IMG_0001.JPG`` a Mac leaves beside a
    photo on a USB stick is no picture), counted, and without ``recursive`` its
    subfolders; other hidden entries (``.DS_Store``, ``.git/``) go unmentioned."""
    entries = folder_entries(folder, recursive)
    regular = [path for path in entries if os.path.isfile(path)]
    inputs = [path for path in regular if is_input_name(path)]
    other = collections.Counter(os.path.splitext(path)[1] or "no extension" for path in regular
                                if not is_input_name(path) and not hidden(path))
    subfolders = 0 if recursive else sum(os.path.isdir(path) and not hidden(path)
                                         for path in entries)
    files = sorted(path for path in inputs if not hidden(path))
    return FolderScan(tuple(files), left_out_notice(folder, other, len(inputs) - len(files),
                                                    subfolders))


def left_out_notice(folder, other, hidden_inputs, subfolders):
    """``FOLDER: left out ...`` for ``other`` (extension: count of files not read),
    ``hidden_inputs`` hidden images and videos and ``subfolders`` not searched; None if
    none."""
    parts = []
    if other:
        parts.append("%d file(s) of a type zoo detect does not read (%s)" % (
            sum(other.values()), ", ".join("%s %d" % item for item in sorted(other.items()))))
    if hidden_inputs:
        parts.append("%d hidden image or video file(s) (a name starting with a dot)"
                     % hidden_inputs)
    if subfolders:
        parts.append("%d subfolder(s) not searched (--recursive searches them)" % subfolders)
    return "%s: left out %s" % (folder, "; ".join(parts)) if parts else None


def hidden(path):
    """Whether an entry :func:`folder_entries` gives is hidden: its name starts with a dot
    (the folders on its way are not hidden, since hidden ones are not searched)."""
    return os.path.basename(path).startswith(".")


def listed_paths(list_file):
    """The paths a list file names, one a line (blank lines and ``#`` comments ignored),
    relative ones taken from the list file's folder."""
    try:
        with open(list_file, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle]
    except (OSError, UnicodeDecodeError) as err:
        raise OptionsError("list file %s cannot be read: %s"
                           % (list_file, getattr(err, "strerror", None) or err)) from None
    base = os.path.dirname(os.path.abspath(list_file))
    return [os.path.join(base, line) for line in lines if line and not line.startswith("#")]


def spec_entries(spec, recursive):
    """The files and folders one command-line input names: a file, a folder, a glob's
    matching files (expanded here, so quoting it works on every shell) or a list file's
    entries (``@FILE``: files and folders). An input naming nothing is an OptionsError."""
    if spec.startswith(LIST_PREFIX):  # a listed file that is missing is skipped, not fatal
        return listed_paths(spec[len(LIST_PREFIX):])
    if os.path.exists(spec):
        return [spec]
    if glob.has_magic(spec):
        matches = sorted(path for path in glob.glob(spec, recursive=recursive)
                         if os.path.isfile(path))
        if matches:
            return matches
        raise OptionsError("input %r: the pattern matches no file" % spec)
    raise OptionsError("input %r: no such file or folder" % spec)


def video_frame_count(path):
    """The number of frames OpenCV reads from a video, counted by reading past them (a
    container's stated count can be wrong); DataError if it cannot be opened or is empty."""
    capture = cv2.VideoCapture(path)
    try:
        count = 0
        while capture.isOpened() and capture.grab():
            count += 1
    finally:
        capture.release()
    if count == 0:
        raise DataError("%s: cannot read a frame of the video" % path)
    return count


@dataclass(frozen=True)
class ExpandedInputs:
    """What the command-line inputs name: ``inputs``, every :class:`Input` in their order,
    each file once (videos as every ``every``-th frame from frame 0); ``skipped``, ``(path,
    reason)`` for each video that cannot be opened; ``left_out``, a line for each named
    folder that leaves files or subfolders out (:func:`scan_folder`)."""
    inputs: list
    skipped: list
    left_out: list


def expand_inputs(specs, recursive=False, every=1):
    """The :class:`ExpandedInputs` of the command-line ``specs``; each folder is listed once."""
    entries = [entry for spec in specs for entry in spec_entries(spec, recursive)]
    scans = {folder: scan_folder(folder, recursive)
             for folder in dict.fromkeys(entries) if os.path.isdir(folder)}
    paths = dict.fromkeys(path for entry in entries
                          for path in (scans[entry].files if entry in scans else [entry]))
    inputs, skipped = [], []
    for path in paths:
        if not is_video(path):
            inputs.append(Input(path))
            continue
        try:
            frames = range(0, video_frame_count(path), every)
        except DataError as err:
            skipped.append((path, str(err)))
            continue
        inputs.extend(Input(path, frame) for frame in frames)
    return ExpandedInputs(inputs, skipped,
                          [scan.notice for scan in scans.values() if scan.notice])


class VideoReader:
    """Frames of one video read in order by whichever thread asks first, kept until asked
    for: the runner's workers ask for frames in order, a few at a time, and a video decodes
    only forwards."""

    def __init__(self, path):
        self.capture = cv2.VideoCapture(path)
        self.position = 0
        self.kept = {}
        self.lock = threading.Lock()

    def frame(self, number, wanted):
        """Frame ``number`` as RGB (frames in ``wanted`` read on the way are kept)."""
        with self.lock:
            while number not in self.kept and self.position <= number:
                if not self.capture.grab():  # frames no one wants are not converted
                    break
                if self.position in wanted:
                    ok, bgr = self.capture.retrieve()
                    if ok:
                        self.kept[self.position] = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
                self.position += 1
            image = self.kept.pop(number, None)
        if image is None:
            raise DataError("frame %d cannot be read" % number)
        return image


class InputImages:
    """The :class:`Input` s as a source of :class:`zoo.inference.runner.BatchRunner`.

    An input that cannot be read loads as None (the runner skips it) with its reason in
    :attr:`errors` (index: message naming the file), or, if ``strict``, raises that
    DataError. With ``keep`` the decoded image is kept in :attr:`images` (index: RGB array)
    until :meth:`take` n, for drawing the detections without decoding the file again.
    """

    def __init__(self, inputs, strict=False, keep=False, exif="apply"):
        self.inputs = list(inputs)
        self.strict, self.keep, self.exif = strict, keep, exif
        self.errors, self.images = {}, {}
        self.videos = {path: (VideoReader(path), {i.video_frame for i in self.inputs
                                                  if i.path == path})
                       for path in {i.path for i in self.inputs if i.video_frame is not None}}

    def __len__(self):
        return len(self.inputs)

    def load(self, index):
        try:
            image = self.read(self.inputs[index])
        except DataError as err:
            if self.strict:
                raise
            self.errors[index] = str(err)
            return None
        if self.keep:
            self.images[index] = image
        return image

    def read(self, item):
        """The RGB pixels of one input; DataError naming the file if it cannot be read."""
        if item.video_frame is None:
            try:
                return rgb_image(item.path, exif=self.exif)
            except DataError as err:
                # rgb_image names the index within a call; here the file is the name.
                message = str(err).split(": ", 1)[-1]
                raise DataError(message if item.path in message
                                else "%s: %s" % (item.path, message)) from None
        reader, wanted = self.videos[item.path]
        try:
            return reader.frame(item.video_frame, wanted)
        except DataError as err:
            raise DataError("%s: %s" % (item.path, err)) from None

    def take(self, index):
        """The kept image of input ``index``, forgotten here."""
        return self.images.pop(index)
