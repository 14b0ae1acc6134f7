"""From images to labelled boxes, whichever runtime runs the graph; loads no MXNet.

:class:`BatchDetector` is what every detector shares: images given as files or arrays
are decoded and preprocessed by worker threads a few batches ahead of the running one,
as a model's (or an artifact's) preprocessing dict says (:mod:`zoo.preprocessing`: a
Faster R-CNN's keep their aspect ratio and a batch shares one padded canvas), and a
graph's output rows ``[class, score, x1, y1, x2, y2]`` (corners normalised to the
image) become :class:`Detections` in the image's pixels. A subclass runs the graph:
:class:`zoo.Detector` on MXNet, :class:`zoo.onnx.runtime.OnnxDetector` on ONNX Runtime.
"""
import abc
import collections
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .data.orientation import check_exif_choice, read_in_frame
from .data.transforms import NO_LABEL, inference_transform, pad_batch
from .errors import DataError
from .metrics.coco import corners_to_xywh, default_category_id

EXPECTED_IMAGE = ("a path or an RGB uint8 array of shape HxW (gray), HxWx3 or HxWx4 "
                  "(alpha dropped)")
FRAMES = {"apply": "displayed", "ignore": "stored"}
"""The frame of :class:`Detections` under each ``exif`` choice."""
PREFETCH_BATCHES = 2
"""Batches prepared ahead of the one running: enough to hide a slow decode."""


@dataclass(frozen=True, eq=False)  # equality of arrays has no single truth value
class Detections:
    """One image's detections, highest score first.

    ``boxes`` (N, 4) float32 corners ``[x1, y1, x2, y2]`` in pixels of the input
    image, ``scores`` (N,) float32, ``labels`` (N,) int64 class ids and ``names``
    their class names. ``frame`` is the image frame the boxes are in: ``"displayed"``
    (a photo turned as its EXIF orientation says, as a viewer shows it; an array as
    given) or ``"stored"`` (the file's pixels as stored, EXIF ignored).
    """
    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    names: list
    frame: str = "displayed"

    def __len__(self):
        return len(self.scores)

    def __str__(self):
        """One line per detection: name, score, box."""
        return "\n".join("%s %.2f [%.1f, %.1f, %.1f, %.1f]" % (name, score, *box)
                         for name, score, box in zip(self.names, self.scores, self.boxes))

    def to_coco(self, image_id, category_ids=None):
        """COCO result dicts (``bbox`` is ``[x, y, width, height]`` in pixels);
        ``category_ids[label]`` is a label's category id (default label + 1)."""
        return [{"image_id": int(image_id),
                 "category_id": (default_category_id(label) if category_ids is None
                                 else int(category_ids[label])),
                 "bbox": corners_to_xywh(box), "score": float(score)}
                for box, score, label in zip(self.boxes, self.scores, self.labels)]


def write_coco_results(path, results, category_ids=None):
    """Write ``results``, pairs ``(image_id, Detections)``, as a COCO results JSON file
    (what pycocotools' ``loadRes`` reads); returns ``path``."""
    rows = [row for image_id, found in results for row in found.to_coco(image_id, category_ids)]
    with open(path, "w") as handle:
        json.dump(rows, handle)
    return path


def label_names(class_names, labels):
    """The name of each label; a label without one is written as its number."""
    return [class_names[label] if label < len(class_names) else str(label) for label in labels]


def rgb_image(image, index=0, exif="apply"):
    """An HxWx3 uint8 RGB array from a path or an array the detector accepts; a file is
    turned as its EXIF orientation says unless ``exif`` is ``"ignore"``.

    Raises :class:`DataError` (a ValueError) naming input ``index`` for anything else.
    """
    if isinstance(image, (str, os.PathLike)):
        try:
            return read_in_frame(os.fspath(image), exif)
        except DataError as err:
            raise DataError("image %d: %s" % (index, err)) from None
    if not isinstance(image, np.ndarray):
        raise DataError("image %d: expected %s, got %s" % (index, EXPECTED_IMAGE,
                                                          type(image).__name__))
    channels = image.shape[2] if image.ndim == 3 else None
    if (image.dtype != np.uint8 or image.ndim not in (2, 3) or channels not in (None, 3, 4)
            or image.size == 0):
        raise DataError("image %d: expected %s, got a %s array of shape %s"
                        % (index, EXPECTED_IMAGE, image.dtype, image.shape))
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    # OpenCV takes only contiguous arrays; dropping alpha leaves a strided view.
    return np.ascontiguousarray(image[:, :, :3])


def canvas_im_info(data):
    """``im_info`` rows ``[height, width, 1]`` of a batch ``data`` (B, 3, H, W) whose images
    fill the canvas at scale 1 (stretched ones): what a Faster R-CNN is given for them."""
    height, width = data.shape[2:]
    return np.tile(np.array([[height, width, 1.0]], np.float32), (data.shape[0], 1))


def preparing_threads():
    """Threads that decode and preprocess: half the cores (inference wants them all, and
    decoding an image costs a tenth of detecting on it), at most 4 (enough for any graph)."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def lower_priority():
    """Give the calling thread the lowest CPU priority (Linux only): preparing images then
    takes the cycles a running pass leaves idle instead of stalling the runtime's threads."""
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))
        except OSError:  # a sandbox may forbid it: the threads then run at normal priority
            pass


class BatchDetector(abc.ABC):
    """Detects objects on images with a graph a subclass runs (:meth:`run`).

    ``class_names`` name the labels; ``preprocessing`` (a dict of :mod:`zoo.preprocessing`)
    makes the graph's inputs; ``exif`` is ``"apply"`` (photos turned as their EXIF
    orientation says, boxes in the frame a viewer shows) or ``"ignore"`` (the stored
    pixels). One call at a time: a subclass may share state between calls.
    """

    def __init__(self, class_names, preprocessing, exif="apply"):
        self.exif = check_exif_choice(exif)
        self.class_names = list(class_names)
        self.transform = inference_transform(preprocessing)
        self.workers = preparing_threads()

    def __call__(self, images, score_threshold=0.3, max_detections=100, batch_size=8):
        """:class:`Detections` of one image, or a list of them for a list (or tuple) of
        images. An image is a path or an RGB uint8 array HxW, HxWx3 or HxWx4.

        Keeps the ``max_detections`` best-scoring boxes scoring at least ``score_threshold``.
        Images run ``batch_size`` at a time (fewer if fewer are given; the last batch is
        padded)."""
        if batch_size < 1 or max_detections < 0:
            raise ValueError("need batch_size >= 1 and max_detections >= 0, got %r and %r"
                             % (batch_size, max_detections))
        single = not isinstance(images, (list, tuple))
        images = [images] if single else list(images)
        results = []
        for rows, sizes in self.run(images, max(1, min(batch_size, len(images)))):
            results.extend(self.detections(found, size, score_threshold, max_detections)
                           for found, size in zip(rows, sizes))
        return results[0] if single else results

    @abc.abstractmethod
    def run(self, images, batch_size):
        """Yield ``(rows, sizes)`` per batch: the graph's output rows of each image, a numpy
        ``(n, N, 6)`` array without the pads, and the images' ``(width, height)``; batches
        come from :meth:`prepared`."""

    def prepared(self, images, batch_size):
        """Yield ``((data, im_info), sizes)`` per batch of ``batch_size`` slots (the last
        padded, see :func:`zoo.data.transforms.pad_batch`) and its images' ``(width,
        height)``, decoded and preprocessed by worker threads up to
        :data:`PREFETCH_BATCHES` batches ahead."""
        with ThreadPoolExecutor(self.workers, initializer=lower_priority) as pool:
            starts = collections.deque(range(0, len(images), batch_size))
            pending = collections.deque()
            try:
                while starts or pending:
                    while starts and len(pending) <= PREFETCH_BATCHES:
                        pending.append(self.submit(pool, images, starts.popleft(), batch_size))
                    samples, sizes = zip(*self.finished(pending.popleft()))
                    yield pad_batch(samples, self.transform.size_divisor, batch_size), sizes
            finally:
                for jobs in pending:  # an error or an abandoned generator
                    for future, _ in jobs:
                        future.cancel()

    def submit(self, pool, images, start, batch_size):
        """Start preparing the batch of ``images`` from ``start``: a job ``(future,
        arguments)`` per image, the future giving what :meth:`prepare` returns."""
        arguments = [(images[index], index)
                     for index in range(start, min(start + batch_size, len(images)))]
        return [(pool.submit(self.prepare, *args), args) for args in arguments]

    def finished(self, jobs):
        """The jobs' results, in order. Those no worker has started yet are run here: the
        low-priority workers may be starved by other processes."""
        done_here = {index: self.prepare(*arguments)
                     for index, (future, arguments) in enumerate(jobs) if future.cancel()}
        return [done_here[index] if index in done_here else future.result()
                for index, (future, _) in enumerate(jobs)]

    def prepare(self, image, index):
        """Decode and preprocess one image: ``(transform output, (width, height))``."""
        image = rgb_image(image, index, self.exif)
        return self.transform(image, NO_LABEL), (image.shape[1], image.shape[0])

    def detections(self, rows, size, score_threshold, max_detections):
        """:class:`Detections` from one image's output rows ``[class, score, x1, y1, x2, y2]``
        (corners normalised to the image) and its ``(width, height)``."""
        rows = rows[(rows[:, 0] >= 0) & (rows[:, 1] >= score_threshold)]
        rows = rows[np.argsort(-rows[:, 1], kind="stable")[:max_detections]]
        width, height = size
        labels = rows[:, 0].astype(np.int64)
        return Detections(
            boxes=(rows[:, 2:6] * np.array([width, height, width, height])).astype(np.float32),
            scores=rows[:, 1].astype(np.float32), labels=labels,
            names=label_names(self.class_names, labels), frame=FRAMES[self.exif])
