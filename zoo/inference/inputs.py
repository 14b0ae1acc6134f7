"""What ``zoo detect`` runs on: image files, folders, globs, list files and videos, turned
into one list of :class:`Input` s and read as a source of the one batch runner
(:class:`InputImages`); loads no MXNet.

A file that cannot be read is skipped, not fatal, unless asked: a folder of photos often holds
one broken or foreign file, and a user wants the others detected and the bad one named.
"""
import collections
import fnmatch
import glob
import os
import threading
from dataclasses import dataclass
from typing import Optional

import cv2

from zoo.errors import DataError, OptionsError
from zoo.inference.runner import EncodedImage, ReducedImage, photo

__all__ = ["ExpandedInputs", "IMAGE_EXTENSIONS", "REASONS", "VIDEO_EXTENSIONS", "Input",
           "InputImages", "Skipped", "expand_inputs", "skipped_entry", "subfolder_skipped"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif")
"""Files a folder contributes as images (any case); a GIF is read as its first frame."""
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".m4v", ".webm", ".mpg", ".mpeg")
"""Files read as videos, every Nth frame (any case), whether named or found in a folder."""
LIST_PREFIX = "@"
"""``@FILE`` names a text file listing inputs, one a line."""
REASONS = {
    "unreadable": "a file that cannot be read or decoded",
    "type": "a file of a type zoo detect does not read",
    "hidden": "a hidden file or folder (a name starting with a dot), not read",
    "subfolder": "a subfolder, not searched without --recursive",
    "output": "the --output folder or inside it, never read as input",
}
"""The ``reason`` of a :class:`Skipped` entry: what it means."""


@dataclass(frozen=True)
class Input:
    """One picture to detect on: the file ``path``, or frame ``video_frame`` of that video."""
    path: str
    video_frame: Optional[int] = None


@dataclass(frozen=True)
class Skipped:
    """A file or folder not detected on: ``file`` as found, ``reason`` a key of
    :data:`REASONS`, ``error`` the line saying why."""
    file: str
    reason: str
    error: str


def is_video(path):
    return path.lower().endswith(VIDEO_EXTENSIONS)


def is_input_name(path):
    """Whether a folder contributes the file ``path``: an image or video extension."""
    return path.lower().endswith(IMAGE_EXTENSIONS + VIDEO_EXTENSIONS)


def hidden(path):
    """Whether an entry is hidden: its name starts with a dot (the folders on its way are
    not hidden, since hidden ones are not searched)."""
    return os.path.basename(path).startswith(".")


def is_inside(path, folder):
    """Whether ``path`` is the real folder ``folder`` (None: no folder) or inside it, both
    compared resolved (links followed)."""
    if folder is None:
        return False
    real = os.path.realpath(path)
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def output_skipped(path):
    return Skipped(path, "output", "%s: inside the --output folder, never read as input"
                   % path)


def subfolder_skipped(path):
    """The :class:`Skipped` of a subfolder a listing without ``--recursive`` leaves out."""
    return Skipped(path, "subfolder", "%s: a subfolder, not searched (--recursive searches "
                                      "it)" % path)


def skipped_entry(name, path, regular=True, unread_videos=None):
    """The :class:`Skipped` of a file ``name`` found listing a folder or an object store's
    prefix (``path``, its path there), or None for an input (an image or video): it is left
    out when hidden, not a ``regular`` file (a broken link) or of another type.
    ``unread_videos``: None where videos are read, else the words saying why one is not (as
    the type it is)."""
    if hidden(path):
        return Skipped(name, "hidden", "%s: a hidden file (a name starting with a dot), not "
                                       "read" % name)
    if not regular:
        return Skipped(name, "unreadable", "%s: not a regular file (a broken link?)" % name)
    video = is_video(path)
    if is_input_name(path) and not (video and unread_videos is not None):
        return None
    return Skipped(name, "type", "%s: not a type zoo detect reads (%s)" % (
        name, unread_videos if video else extension(path)))


@dataclass(frozen=True)
class FolderScan:
    """What one listing of a folder gives: ``files``, its images and videos (sorted);
    ``left_out``, a :class:`Skipped` for every file and folder it leaves out; ``notice``,
    the line saying what it leaves out (None if nothing)."""
    files: tuple
    left_out: tuple
    notice: Optional[str]


def folder_files(folder, recursive, output):
    """``(files, left_out)``: the files of ``folder`` (and of its subfolders if
    ``recursive``, symlinked ones followed, each real folder searched once so that a link
    back up ends), and a :class:`Skipped` for each folder not searched: hidden ones (such as
    ``.git/`` or ``.thumbnails/``, as ``glob`` leaves them), the real folder ``output`` and
    what is inside it, those that cannot be listed, and without ``recursive`` every
    subfolder."""
    left_out, files, searched = [], [], set()

    def unlisted(err):
        left_out.append(Skipped(err.filename, "unreadable", "%s: cannot list the folder: %s"
                                % (err.filename, err.strerror or err)))
    for root, folders, names in os.walk(folder, onerror=unlisted, followlinks=True):
        real = os.path.realpath(root)
        if real in searched:  # a link back up (a loop), or a second link to one folder
            folders[:] = []
            continue
        searched.add(real)
        kept = []
        for name in sorted(folders):
            path = os.path.join(root, name)
            if hidden(path):
                left_out.append(Skipped(path, "hidden", "%s: a hidden folder, not searched"
                                        % path))
            elif is_inside(path, output):
                left_out.append(output_skipped(path))
            elif not recursive:
                left_out.append(subfolder_skipped(path))
            else:
                kept.append(name)
        folders[:] = kept
        files += [os.path.join(root, name) for name in names]
    return files, left_out


def scan_folder(folder, recursive, output=None):
    """The :class:`FolderScan` of ``folder`` (and its subfolders if ``recursive``). Left out,
    each named: its files of other types (a phone's ``.HEIC`` photos among them), its hidden
    files (the ``._IMG_0001.JPG`` a Mac leaves beside a photo on a USB stick is no
    picture) and the folders :func:`folder_files` does not search. The notice line counts
    the files of other types by extension, the hidden images and videos, the subfolders not
    searched without ``recursive`` and names the output folder; other hidden entries
    (``.DS_Store``, ``.git/``) are listed only."""
    paths, left_out = folder_files(folder, recursive, output)
    files = []
    for path in sorted(paths):
        skipped = skipped_entry(path, path, regular=os.path.isfile(path))
        if skipped is None:
            files.append(path)
        else:
            left_out.append(skipped)
    return FolderScan(tuple(files), tuple(left_out), left_out_notice(folder, left_out))


def extension(path):
    return os.path.splitext(path)[1] or "no extension"


def left_out_notice(folder, left_out):
    """``FOLDER: left out ...`` for the :class:`Skipped` entries ``left_out``, counted; None
    if there is nothing worth a line."""
    other = collections.Counter(extension(item.file) for item in left_out
                                if item.reason == "type")
    hidden_inputs = sum(item.reason == "hidden" and is_input_name(item.file)
                        for item in left_out)
    subfolders = sum(item.reason == "subfolder" for item in left_out)
    outputs = [item.file for item in left_out if item.reason == "output"]
    parts = []
    if other:
        parts.append("%d file(s) of a type zoo detect does not read (%s)" % (
            sum(other.values()), ", ".join("%s %d" % item for item in sorted(other.items()))))
    if hidden_inputs:
        parts.append("%d hidden image or video file(s) (a name starting with a dot)"
                     % hidden_inputs)
    if subfolders:
        parts.append("%d subfolder(s) not searched (--recursive searches them)" % subfolders)
    if outputs:
        parts.append("the --output folder %s (never read as input)" % ", ".join(outputs))
    return "%s: left out %s" % (folder, "; ".join(parts)) if parts else None


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


def glob_note(spec, recursive):
    """The line for a ``**`` glob without ``recursive`` (it then matches one folder level,
    as ``*`` does), else None."""
    if recursive or "**" not in spec:
        return None
    return ("input %r: '**' matches a single folder level without --recursive; add "
            "--recursive to search every subfolder" % spec)


def pattern_matches(names, patterns):
    """Whether the path components ``names`` match the glob components ``patterns``, as
    ``glob`` matches them: ``**`` any number of folders (the last one anything), ``*`` and
    the others one component each, case-sensitively, a hidden name only by a pattern
    starting with a dot."""
    if patterns == ["**"]:
        return bool(names) and not any(name.startswith(".") for name in names)
    if not patterns:
        return not names
    if patterns[0] == "**":
        return any(pattern_matches(names[start:], patterns[1:])
                   for start in range(len(names) + 1))
    if not names or (names[0].startswith(".") and not patterns[0].startswith(".")):
        return False
    return (fnmatch.fnmatchcase(names[0], patterns[0])
            and pattern_matches(names[1:], patterns[1:]))


def video_frames(path):
    """``(read, declared)``: the frames OpenCV reads from a video, counted by reading past
    them, and the count its container declares (0: none); DataError if it cannot be opened
    or no frame can be read."""
    capture = cv2.VideoCapture(path)
    try:
        declared = int(max(0, capture.get(cv2.CAP_PROP_FRAME_COUNT) or 0))
        count = 0
        while capture.isOpened() and capture.grab():
            count += 1
    finally:
        capture.release()
    if count == 0:
        raise DataError("%s: cannot read a frame of the video" % path)
    return count, declared


def damaged_video_note(path, read, declared):
    """The line for a video cut short or damaged: fewer frames read than its container
    declares (a frame's leeway, or one in a hundred: a container's count may be estimated
    from its duration); else None."""
    if declared - read <= max(1, declared // 100):
        return None
    return ("%s: damaged or cut short: %d of the %d frames its container declares could be "
            "read; detecting on those" % (path, read, declared))


@dataclass(frozen=True)
class ExpandedInputs:
    """What the command-line inputs name: ``inputs``, every :class:`Input` in their order,
    each file once however it is named (paths compared resolved; videos as every
    ``every``-th frame from frame 0); ``skipped``, a :class:`Skipped` for each video that
    cannot be opened and each file or folder a folder or glob leaves out; ``left_out``, a
    line for each named folder that leaves files or subfolders out (:func:`scan_folder`);
    ``notes``, lines worth a warning (a ``**`` glob without ``recursive``, a damaged
    video)."""
    inputs: list
    skipped: list
    left_out: list
    notes: list


class Expansion:
    """Builds one :class:`ExpandedInputs`; see :func:`expand_inputs`."""

    def __init__(self, recursive, every, output):
        self.recursive, self.every = recursive, every
        self.output = None if output is None else os.path.realpath(output)
        self.inputs, self.skipped, self.left_out, self.notes = [], [], [], []
        self.seen, self.scanned = set(), set()  # real paths of files and folders taken

    def spec(self, spec):
        """Take one command-line input: a file, a folder, a glob's matching files (expanded
        here, so quoting it works on every shell) or a list file's entries (``@FILE``: files
        and folders). An input naming nothing is an OptionsError; a listed file that is
        missing is skipped, not fatal."""
        if spec.startswith(LIST_PREFIX):
            for path in listed_paths(spec[len(LIST_PREFIX):]):
                self.named(path, spec)
        elif os.path.exists(spec):
            self.named(spec, spec)
        elif glob.has_magic(spec):
            self.glob(spec)
        else:
            raise OptionsError("input %r: no such file or folder" % spec)

    def named(self, path, spec):
        """A file or folder the user named: never inside the output folder."""
        if is_inside(path, self.output):
            raise OptionsError("input %s%s is inside --output %s: the output folder is never "
                               "read as input; write elsewhere with --output" % (
                                   path, "" if path == spec else " (from %s)" % spec,
                                   self.output))
        if os.path.isdir(path):
            self.folder(path)
        else:
            self.file(path)

    def glob(self, spec):
        note = glob_note(spec, self.recursive)
        if note:
            self.notes.append(note)
        parts = spec.split(os.sep)
        if self.recursive and "**" in parts:
            found = self.deep_glob(parts)
        else:  # no component recurses: glob lists each folder on the way once
            found = glob.glob(spec)
        matches = sorted(path for path in found if os.path.isfile(path))
        if not matches:
            raise OptionsError("input %r: the pattern matches no file" % spec)
        for path in matches:
            if is_inside(path, self.output):
                self.skipped.append(output_skipped(path))
            else:
                self.file(path)

    def deep_glob(self, parts):
        """The paths a pattern (split into ``parts``) with a ``**`` component matches, as
        ``glob.glob(..., recursive=True)`` gives them, but each real folder searched once:
        glob follows symlinked folders without end (a link back up, or two, hang it). The
        folders before the first ``**`` are globbed; below, hidden folders and the output
        folder are not searched."""
        star = parts.index("**")
        head = os.sep.join(parts[:star]) or (os.sep if star else "")
        bases = ([path for path in glob.glob(head) if os.path.isdir(path)]
                 if glob.has_magic(head) else [head])
        found, searched = [], set()
        for base in bases:
            for root, folders, names in os.walk(base or os.curdir, followlinks=True):
                real = os.path.realpath(root)
                if real in searched:
                    folders[:] = []
                    continue
                searched.add(real)
                folders.sort()  # the first name of a folder met twice is the one kept
                for name in list(folders):
                    if name.startswith(".") or is_inside(os.path.join(root, name),
                                                         self.output):
                        folders.remove(name)
                        if not name.startswith("."):
                            self.skipped.append(output_skipped(os.path.join(root, name)))
                relative = os.path.relpath(root, base or os.curdir).split(os.sep)
                relative = [] if relative == [os.curdir] else relative
                found += [os.path.join(base, *relative, name) for name in names
                          if pattern_matches(relative + [name], parts[star:])]
        return found

    def folder(self, folder):
        real = os.path.realpath(folder)
        if real in self.scanned:
            return
        self.scanned.add(real)
        scan = scan_folder(folder, self.recursive, self.output)
        self.skipped.extend(scan.left_out)
        if scan.notice:
            self.left_out.append(scan.notice)
        for path in scan.files:
            self.file(path)

    def file(self, path):
        """One image or video file, unless taken already under another name."""
        real = os.path.realpath(path)
        if real in self.seen:
            return
        self.seen.add(real)
        if not is_video(path):
            self.inputs.append(Input(path))
            return
        try:
            read, declared = video_frames(path)
        except DataError as err:
            self.skipped.append(Skipped(path, "unreadable", str(err)))
            return
        note = damaged_video_note(path, read, declared)
        if note:
            self.notes.append(note)
        self.inputs.extend(Input(path, frame) for frame in range(0, read, self.every))


def expand_inputs(specs, recursive=False, every=1, output=None):
    """The :class:`ExpandedInputs` of the command-line ``specs``; each folder is listed
    once. ``output``: the folder the results go to; a named input inside it is an
    OptionsError, and a folder or glob leaves it out."""
    expansion = Expansion(recursive, every, output)
    for spec in specs:
        expansion.spec(spec)
    return ExpandedInputs(expansion.inputs, expansion.skipped, expansion.left_out,
                          expansion.notes)


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

    ``decode_for``: a preprocessing dict; a large JPEG file is then decoded reduced, at the
    size it is resized to (:func:`zoo.inference.runner.photo`), and one kept to be
    :meth:`take` n is decoded whole again there (crops are cut from the whole photo), so
    give it where few images are taken: not for drawing every picture.

    :attr:`encoded` (index: bytes) holds the file of an input received rather than read (a
    Ray worker's photo from an object store or a dataset, :mod:`zoo.ray.cluster`): it is
    decoded as the file of the input's path would be, and forgotten once taken; a
    DataError there is the input's error (a file that could not be received).
    """

    def __init__(self, inputs, strict=False, keep=False, exif="apply", decode_for=None,
                 encoded=None):
        self.inputs = list(inputs)
        self.strict, self.keep, self.exif = strict, keep, exif
        self.decode_for = decode_for
        self.errors, self.images, self.encoded = {}, {}, dict(encoded or {})
        self.videos = {path: (VideoReader(path), {i.video_frame for i in self.inputs
                                                  if i.path == path})
                       for path in {i.path for i in self.inputs if i.video_frame is not None}}

    def __len__(self):
        return len(self.inputs)

    def load(self, index):
        try:
            image = self.read(index, self.decode_for)
        except DataError as err:
            if self.strict:
                raise
            self.errors[index] = str(err)
            self.encoded.pop(index, None)
            return None
        if self.keep and not isinstance(image, ReducedImage):
            self.images[index] = image
        if not (self.keep and isinstance(image, ReducedImage)):
            self.encoded.pop(index, None)  # read again only to be taken whole
        return image

    def read(self, index, decode_for=None):
        """The RGB pixels of input ``index`` (a :class:`~zoo.inference.runner.ReducedImage`
        of a large JPEG file, given ``decode_for``); DataError naming the file if it cannot
        be read."""
        item = self.inputs[index]
        if item.video_frame is None:
            received = self.encoded.get(index)
            if isinstance(received, DataError):
                raise received
            image = item.path if received is None else EncodedImage(received, item.path)
            try:
                return photo(image, exif=self.exif, preprocessing=decode_for)
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

    def take(self, index, wanted=True):
        """The kept image of input ``index``, forgotten here; one decoded reduced is read
        again whole. Not ``wanted`` (a picture with nothing to crop): None, the kept image
        forgotten all the same."""
        image = self.images.pop(index, None)
        if image is None and wanted:
            image = self.read(index)
        self.encoded.pop(index, None)
        return image if wanted else None
