"""The one batch runner: from images to a graph's detection rows, whichever runtime runs
the graph; loads no MXNet.

:class:`BatchRunner` serves every path that runs a detection graph over many images:
:class:`zoo.Detector` and the ONNX and OpenVINO detectors (:class:`BatchDetector`), also
on a dataset split (:func:`zoo.inference.evaluation.dataset_rows`), and int8 calibration
(:func:`zoo.inference.quantization.calibration_iter`). It decodes the images (an
:class:`ImageList` of files or arrays, or a dataset's :class:`DatasetImages`) on worker
threads of normal priority a few batches ahead of the running one (an image no worker has
started when its batch is due is prepared on the calling thread), resizes them as a model's (or an
artifact's) preprocessing dict says (:mod:`zoo.schema.preprocessing`), batches images of
one input shape together, runs the batches on an engine (MXNet's
:class:`~zoo.inference.detector.MXNetEngine`, ONNX Runtime's) and gives each image's rows
``[class, score, x1, y1, x2, y2]`` (corners normalised to the image) back in input order,
only those of real boxes (:func:`image_rows`): so every runtime, ``zoo detect`` and ``zoo
eval`` see the same.

A Faster R-CNN keeps each image's aspect ratio, and each image runs on the canvas of its
own resized size (rounded up to ``size_divisor``) whatever the batch size: a batch holds
only images of one canvas (as Detectron2's aspect-ratio grouping, but exact), so that
detections do not depend on the batch size or on which images share a batch, and a mixed
batch never pays for a canvas as large as its widest and tallest images together.
"""
import abc
import collections
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from zoo.data.orientation import check_exif_choice, read_in_frame, read_reduced
from zoo.data.transforms import NO_LABEL, inference_transform, pad_batch
from zoo.schema.preprocessing import canvas_size, resized_size, scaled_size, with_input_size
from zoo.errors import DataError
from zoo.inference.tiles import detector_outputs, run_tiling
from zoo.metrics.coco import corners_to_xywh, default_category_id
from zoo.progress import NoBar, progress_bar

__all__ = ["BATCH_PIXELS", "BatchDetector", "BatchRunner", "DatasetImages", "Detections",
           "EncodedImage", "ImageList", "MAX_BATCH", "MAX_DETECTIONS", "MIN_BOX_PIXELS",
           "ReducedImage", "SCORE_THRESHOLD", "default_batch_size", "image_rows", "label_names",
           "photo", "rgb_image", "write_coco_results"]

EXPECTED_IMAGE = ("a path, an EncodedImage or an RGB uint8 array of shape HxW (gray), HxWx3 "
                  "or HxWx4 (alpha dropped)")
FRAMES = {"apply": "displayed", "ignore": "stored"}
"""The frame of :class:`Detections` under each ``exif`` choice."""
PREFETCH_BATCHES = 2
"""Batches prepared ahead of the one running: enough to hide a slow decode."""
GROUP_WINDOW = 4
"""Batches of images that may wait for others of their input shape before the oldest shape
runs partly filled: enough to fill batches from a folder of mixed orientations."""
MIN_BOX_PIXELS = 1.0
"""The least width and height, in the image's pixels, of a box kept (once clipped to the
image): a trained FPN gave boxes such as ``[0, 1200, 0, 0]``, which mark nothing, score as
false positives and were written as 1x1 crops."""
SCORE_THRESHOLD = 0.5
"""The score a detection must reach to be reported or drawn unless the caller says
otherwise: the one default of a detector's ``score_threshold``, ``zoo detect`` and ``zoo
demo --threshold`` and :func:`zoo.inference.visualize.draw_detections`, so that a photo gives
the same detections from the command line and from Python. (The graph's own pre-NMS
threshold, a config's ``score_threshold``, only bounds what reaches this one.)"""
BATCH_PIXELS = 1 << 20
"""The network-input pixels a batch holds when the caller names no batch size
(:func:`default_batch_size`): a batch's intermediate arrays grow with its pixels, and past
about a megapixel a batch is no faster a picture on a CPU. Measured over 4000x3000 photos
(zoo detect, 2 cores): a Faster R-CNN FPN ResNet-50 at 600x1000 peaked at 3.98 GB at batch 8
against 1.86 GB at batch 1, and was no faster; an SSD-512 ResNet-50 ran 20% more images a
second at batch 4 than at 1 (BENCHMARKS.md)."""
MAX_BATCH = 8
"""The most images a default batch holds (a small SSD's)."""
MAX_DETECTIONS = 100
"""The detections kept per image unless the caller says otherwise (the best-scoring), by a
detector and ``zoo detect`` alike."""


@dataclass(frozen=True, eq=False)  # equality of arrays has no single truth value
class Detections:
    """One image's detections, highest score first.

    ``boxes`` (N, 4) float32 corners ``[x1, y1, x2, y2]`` in pixels of the input
    image, ``scores`` (N,) float32, ``labels`` (N,) int64 class ids and ``names``
    their class names. ``frame`` is the image frame the boxes are in: ``"displayed"``
    (a photo turned as its EXIF orientation says, as a viewer shows it; an array as
    given) or ``"stored"`` (the file's pixels as stored, EXIF ignored).
    ``category_ids`` (N,) int64: each detection's COCO category id, for a detector trained
    on a COCO file (the file's ids); None for one without.
    """
    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    names: list
    frame: str = "displayed"
    category_ids: object = None

    def __len__(self):
        return len(self.scores)

    def __str__(self):
        """One line per detection: name, score, box."""
        return "\n".join("%s %.2f [%.1f, %.1f, %.1f, %.1f]" % (name, score, *box)
                         for name, score, box in zip(self.names, self.scores, self.boxes))

    def to_coco(self, image_id, category_ids=None):
        """COCO result dicts (``bbox`` is ``[x, y, width, height]`` in pixels), each named
        by the detection's own category id (:attr:`category_ids`); ``category_ids[label]``
        given here names a label's instead. Without either, label + 1."""
        if category_ids is not None:
            ids = [int(category_ids[label]) for label in self.labels]
        elif self.category_ids is not None:
            ids = [int(category) for category in self.category_ids]
        else:
            ids = [default_category_id(label) for label in self.labels]
        return [{"image_id": int(image_id), "category_id": category,
                 "bbox": corners_to_xywh(box), "score": float(score)}
                for box, score, category in zip(self.boxes, self.scores, ids)]


def write_coco_results(path, results, category_ids=None):
    """Write ``results``, pairs ``(image_id, Detections)``, as a COCO results JSON file
    (what pycocotools' ``loadRes`` reads), categories as :meth:`Detections.to_coco` names
    them; returns ``path``."""
    rows = [row for image_id, found in results for row in found.to_coco(image_id, category_ids)]
    with open(path, "w") as handle:
        json.dump(rows, handle)
    return path


def image_rows(rows, size, extent=None):
    """The rows of real boxes among one image's output ``rows`` (N, 6), the image ``(width,
    height)`` pixels: padding rows (class -1) dropped, corners clipped to the image, and
    boxes narrower or lower than :data:`MIN_BOX_PIXELS` there dropped. ``extent``: for an
    image decoded reduced (:class:`ReducedImage`), ``(x, y)`` the part of the photo's width
    and height its pixels stand for: the rows, normalised to those pixels, are brought to
    the photo's."""
    rows = rows[rows[:, 0] >= 0]  # a copy: the engine's array is left as it was
    if extent is not None:
        rows[:, 2:6] *= np.asarray(extent * 2, np.float32)
    rows[:, 2:6] = np.clip(rows[:, 2:6], 0.0, 1.0)
    extent = (rows[:, 4:6] - rows[:, 2:4]) * np.asarray(size, np.float32)
    return rows[(extent >= MIN_BOX_PIXELS).all(axis=1)]


def label_names(class_names, labels):
    """The name of each label; a label without one is written as its number."""
    return [class_names[label] if label < len(class_names) else str(label) for label in labels]


@dataclass(frozen=True)
class EncodedImage:
    """The bytes of an image file received rather than read (an HTTP upload, ``zoo
    serve``), ``name`` naming them in errors: read as a file of that name would be."""
    data: bytes
    name: str


def rgb_image(image, index=0, exif="apply"):
    """An HxWx3 uint8 RGB array from a path, an :class:`EncodedImage` or an array the
    detector accepts; a file is turned as its EXIF orientation says unless ``exif`` is
    ``"ignore"``.

    Raises :class:`DataError` (a ValueError) naming input ``index`` for anything else.
    """
    if isinstance(image, (str, os.PathLike, EncodedImage)):
        path, data = file_and_data(image)
        try:
            return read_in_frame(path, exif, data)
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


@dataclass(frozen=True, eq=False)
class ReducedImage:
    """A photo decoded at 1/``factor`` of its size (libjpeg's DCT scaling,
    :func:`zoo.data.images.decode_reduced`): ``pixels`` HxWx3 uint8 RGB, each one a whole
    ``factor`` x ``factor`` block of the photo's, and ``size`` the photo's ``(width,
    height)`` in the same frame. Its detections are in the photo's pixels."""
    pixels: np.ndarray
    factor: int
    size: tuple

    @property
    def extent(self):
        """``(x, y)``: the part of the photo's width and height the pixels stand for (a
        last block cut short by the photo's edge makes it a little over 1)."""
        return (self.pixels.shape[1] * self.factor / self.size[0],
                self.pixels.shape[0] * self.factor / self.size[1])


def photo(image, index=0, exif="apply", preprocessing=None):
    """:func:`rgb_image` of ``image``, except that a file is decoded at the size
    ``preprocessing`` (a dict of :mod:`zoo.schema.preprocessing`) resizes it to, where a
    JPEG is large enough to be decoded reduced: then a :class:`ReducedImage`."""
    if preprocessing is None or not isinstance(image, (str, os.PathLike, EncodedImage)):
        return rgb_image(image, index, exif)
    path, data = file_and_data(image)
    try:
        pixels, factor, size = read_reduced(
            path, exif, lambda width, height: resized_size(preprocessing, width, height),
            data)
    except DataError as err:
        raise DataError("image %d: %s" % (index, err)) from None
    return pixels if factor == 1 else ReducedImage(pixels, factor, size)


def file_and_data(image):
    """``(path, data)`` of a path (data None: read from the file) or an
    :class:`EncodedImage`."""
    if isinstance(image, EncodedImage):
        return image.name, image.data
    return os.fspath(image), None


def preparing_threads(cores=None):
    """Threads that decode and preprocess: half the ``cores`` (default: the machine's;
    inference wants them all, and decoding an image costs a tenth of detecting on it), at
    most 4 (enough for any graph)."""
    return max(1, min(4, (cores or os.cpu_count() or 2) // 2))


class ImageList:
    """Images given by a user: paths or RGB uint8 arrays (:func:`rgb_image`), files turned as
    their EXIF orientation says unless ``exif`` is ``"ignore"``. ``decode_for``: a
    preprocessing dict; a large JPEG file is then decoded reduced to the size it resizes to
    (:func:`photo`).

    A source of the runner has ``__len__`` and ``load(index)``, an HxWx3 uint8 RGB array
    (or a :class:`ReducedImage`), or None for an image it skips
    (:class:`zoo.inference.inputs.InputImages` does, for a file it cannot read); the runner
    then gives no rows for it."""

    def __init__(self, images, exif="apply", decode_for=None):
        self.images = list(images)
        self.exif = check_exif_choice(exif)
        self.decode_for = decode_for

    def __len__(self):
        return len(self.images)

    def load(self, index):
        """Image ``index`` as an HxWx3 uint8 RGB array or a :class:`ReducedImage`."""
        return photo(self.images[index], index, self.exif, self.decode_for)


class DatasetImages:
    """The images of a :class:`zoo.data.DetectionDataset`, in its order (each checked
    against its annotation's size as the dataset reads it)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def load(self, index):
        """Item ``index``'s image as an HxWx3 uint8 RGB array."""
        try:
            return self.dataset[index][0]
        except DataError as err:
            err.skippable = True  # skip_bad's check of every image first would drop it
            raise


@dataclass(frozen=True, eq=False)
class InputBatch:
    """A batch of one input shape: ``data`` (B, 3, H, W) float32 and ``im_info`` (B, 3)
    rows ``[height, width, scale]`` (None for stretched images) of the images ``indices``
    (positions in their source), whose ``(width, height)`` are ``sizes``; ``extents``,
    each image's :attr:`ReducedImage.extent` (None: decoded whole)."""
    indices: tuple
    data: np.ndarray
    im_info: object
    sizes: tuple
    extents: tuple = None


class BatchRunner:
    """Decodes, resizes, batches, prefetches and runs images; see the module docstring.

    ``preprocessing``: the dict of :mod:`zoo.schema.preprocessing` (a model's or an
    artifact's). ``engine``: what runs a batch, with ``launch(data, im_info)`` starting the
    graph (it may return before the result is ready) and ``fetch(handle)`` giving its
    (B, N, 6) rows as numpy; None for a runner that only prepares inputs (calibration).
    ``workers``: decoding threads (default :func:`preparing_threads`).
    """

    def __init__(self, preprocessing, engine=None, workers=None):
        self.default_batch_size = default_batch_size(preprocessing)
        self.transform = inference_transform(preprocessing)
        self.engine = engine
        self.workers = workers or preparing_threads()

    def batches(self, source, batch_size=None):
        """Yield :class:`InputBatch` es of at most ``batch_size`` images of ``source`` (an
        :class:`ImageList` or :class:`DatasetImages`), each of one input shape (None: the
        input's :func:`default_batch_size`). Images are
        prepared in order, up to :data:`PREFETCH_BATCHES` batches ahead; a shape's batch
        is run once full, or, partly filled, when its oldest image is the oldest waiting
        and :data:`GROUP_WINDOW` batches of images wait."""
        batch_size = max(1, min(batch_size or self.default_batch_size, len(source)))
        groups = collections.OrderedDict()  # input shape: [(index, sample, size)], oldest first
        waiting = 0
        for index, prepared in self._prepared(source, batch_size):
            if prepared is None:  # a source that skips an image it cannot read
                yield InputBatch((index,), None, None, (None,), (None,))
                continue
            sample, size, extent = prepared
            key = self._shape(sample)
            groups.setdefault(key, []).append((index, sample, size, extent))
            waiting += 1
            if len(groups[key]) == batch_size:
                waiting -= batch_size
                yield self._batch(groups.pop(key))
            elif waiting > GROUP_WINDOW * batch_size:
                oldest = min(groups, key=lambda shape: groups[shape][0][0])
                waiting -= len(groups[oldest])
                yield self._batch(groups.pop(oldest))
        for key in sorted(groups, key=lambda shape: groups[shape][0][0]):
            yield self._batch(groups[key], batch_size)

    def outputs(self, source, batch_size=None, progress=None):
        """Yield ``(index, rows, (width, height))`` for every image of ``source``, in
        order: the graph's output rows of the image, a numpy (N, 6) array (``rows`` and
        the size None for an image the source skipped), only those of real boxes
        (:func:`image_rows`). ``progress``: a description for a progress bar on stderr
        (None: no bar)."""
        done, next_index = {}, 0
        bar = _progress_bar(progress, len(source))
        for batch, rows in self._run(self.batches(source, batch_size)):
            done.update((index, (found if found is None else image_rows(found, size, extent),
                                 size))
                        for index, found, size, extent in zip(batch.indices, rows, batch.sizes,
                                                              batch.extents))
            bar.update(len(batch.indices))
            while next_index in done:
                yield (next_index,) + done.pop(next_index)
                next_index += 1
        bar.close()

    def _run(self, batches):
        """``(batch, rows)`` per batch; the next batch is launched before this one's rows
        are fetched, so an asynchronous engine runs while the caller uses them."""
        previous = None
        for batch in batches:
            if batch.data is None:  # a skipped image: nothing to run
                yield batch, [None]
                continue
            current = batch, self.engine.launch(batch.data, batch.im_info)
            if previous is not None:
                yield previous[0], self.engine.fetch(previous[1])
            previous = current
        if previous is not None:
            yield previous[0], self.engine.fetch(previous[1])

    def _shape(self, sample):
        """The input shape an image runs at: its own canvas (short-side images), else the
        one shape every stretched image has."""
        if self.transform.size_divisor is None:
            return None
        return canvas_size([sample[0].shape[1:]], self.transform.size_divisor)

    def _batch(self, items, slots=None):
        """The batch of ``items``. Stretched images, all of one shape, fill ``slots`` (the
        last batch padded reuses the executor of the others); a canvas group runs at its
        own size, since padding it would cost as much as filling it."""
        indices, samples, sizes, extents = zip(*items)
        slots = slots if self.transform.size_divisor is None else None
        data, im_info = pad_batch(samples, self.transform.size_divisor, slots)
        return InputBatch(indices, data, im_info, sizes, extents)

    def _prepared(self, source, batch_size):
        """``(index, ((transform output), (width, height)))`` for every image, in order,
        decoded and preprocessed by worker threads up to :data:`PREFETCH_BATCHES` batches
        ahead."""
        # Normal priority: idle-priority workers (tried for a little speed on an idle
        # machine) starved behind any other work, 70x their CPU time in wall time.
        with ThreadPoolExecutor(self.workers) as pool:
            starts = collections.deque(range(0, len(source), batch_size))
            pending = collections.deque()
            try:
                while starts or pending:
                    while starts and len(pending) <= PREFETCH_BATCHES:
                        pending.append(self._submit(pool, source, starts.popleft(), batch_size))
                    yield from self._finished(pending.popleft(), source)
            finally:
                for jobs in pending:  # an error or an abandoned generator
                    for _, future in jobs:
                        future.cancel()

    def _submit(self, pool, source, start, batch_size):
        """Start preparing the ``batch_size`` images from ``start``: ``(index, future)``
        each."""
        return [(index, pool.submit(self.prepare, source, index))
                for index in range(start, min(start + batch_size, len(source)))]

    def _finished(self, jobs, source):
        """``(index, result)`` of the jobs, in order. Those no worker has started yet are run
        here, rather than waited for: the workers may be busy on the images before them."""
        done_here = {index: self.prepare(source, index)
                     for index, future in jobs if future.cancel()}
        return [(index, done_here[index] if index in done_here else future.result())
                for index, future in jobs]

    def prepare(self, source, index):
        """Decode and preprocess one image: ``(transform output, (width, height), extent)``
        (extent: a :class:`ReducedImage`'s, else None), or None where the source skips the
        image (its ``load`` returned None)."""
        image = source.load(index)
        if image is None:
            return None
        if not isinstance(image, ReducedImage):
            return self.transform(image, NO_LABEL), (image.shape[1], image.shape[0]), None
        sample = self.transform(image.pixels, NO_LABEL)
        if self.transform.size_divisor is not None:
            # im_info's scale is the photo's: the RPN's least box (min_size times the
            # scale) is in the photo's pixels, not the reduced ones.
            width, height = image.size
            sample = sample[:2] + (scaled_size(height, width, self.transform.data_shape,
                                               self.transform.max_size)[2],)
        return sample, image.size, image.extent


def default_batch_size(preprocessing):
    """The images a batch of ``preprocessing``'s input (a model's or an artifact's dict)
    holds unless the caller names a batch size: as many as fit in :data:`BATCH_PIXELS` of
    input, each counted at its largest (a Faster R-CNN's short side by its long-side limit),
    1 to :data:`MAX_BATCH`: 8 for an SSD up to 362 pixels, 4 at 512, 1 for a Faster R-CNN
    at 600x1000."""
    if preprocessing.get("resize") == "short_side":
        pixels = preprocessing["short_side"] * preprocessing["max_size"]
    else:
        pixels = preprocessing["data_shape"][0] ** 2
    return max(1, min(MAX_BATCH, BATCH_PIXELS // pixels))


def _progress_bar(description, total):
    if description is None:
        return NoBar()
    return progress_bar(total=total, desc=description, unit="image")


class BatchDetector(abc.ABC):
    """Detects objects on images, as :class:`zoo.Detector` and the ONNX detector do: a
    :class:`BatchRunner` on the engine a subclass gives (:meth:`engine`).

    ``class_names`` name the labels; ``preprocessing`` (a dict of
    :mod:`zoo.schema.preprocessing`) makes the graph's inputs; ``exif`` is ``"apply"`` (photos
    turned as their EXIF orientation says, boxes in the frame a viewer shows) or ``"ignore"``
    (the stored pixels); ``category_ids``: each label's COCO category id, or None (see
    :class:`Detections`); ``data_threads``: the threads that decode and preprocess images
    (default :func:`preparing_threads`), whatever runtime runs the graph; ``precision``:
    ``{"dtype": "fp32"}`` (the default) or an int8 model's, with its calibration. One call
    at a time: an engine may share state between calls.
    """

    epoch = None
    """The artifact epoch the detector runs; None for a deployed file or a model in memory."""
    tiles = None
    """The :class:`~zoo.inference.tiles.Tiling` the model was trained on (an artifact's
    record), which ``zoo detect`` and ``zoo eval`` run unless told otherwise; None: whole
    photos."""

    def __init__(self, class_names, preprocessing, exif="apply", category_ids=None,
                 data_threads=None, precision=None):
        self.exif = check_exif_choice(exif)
        self.class_names = list(class_names)
        self.category_ids = None if category_ids is None else list(category_ids)
        self.precision = dict(precision or {"dtype": "fp32"})
        self.preprocessing = preprocessing
        self.runner = BatchRunner(preprocessing, self.engine(), data_threads)
        self.transform = self.runner.transform

    def set_input_size(self, data_shape=None, max_size=None):
        """Run at another input size from now on: ``data_shape`` the short side and
        ``max_size`` the long-side limit (None: the checkpoint's own); a size the model
        cannot take is an :class:`~zoo.errors.OptionsError`
        (:func:`zoo.schema.preprocessing.with_input_size`). Returns the detector."""
        preprocessing = with_input_size(self.preprocessing, data_shape, max_size)
        if preprocessing is not self.preprocessing:
            self.preprocessing = preprocessing
            self.runner = BatchRunner(preprocessing, self.engine(), self.runner.workers)
            self.transform = self.runner.transform
        return self

    @abc.abstractmethod
    def engine(self):
        """What runs the graph: an object with ``launch(data, im_info)`` and
        ``fetch(handle)`` (see :class:`BatchRunner`)."""

    def __call__(self, images, score_threshold=SCORE_THRESHOLD, max_detections=MAX_DETECTIONS,
                 batch_size=None, tiles=None, tile_overlap=None):
        """:class:`Detections` of one image, or a list of them for a list (or tuple) of
        images. An image is a path, an :class:`EncodedImage` (a file's bytes) or an RGB
        uint8 array HxW, HxWx3 or HxWx4; a JPEG file
        much larger than the input is decoded reduced to the size the input needs (libjpeg's
        DCT scaling, :func:`photo`), its boxes still in the whole photo's pixels.

        Keeps the ``max_detections`` best-scoring boxes scoring at least ``score_threshold``
        (defaults :data:`MAX_DETECTIONS` and :data:`SCORE_THRESHOLD`, as ``zoo detect``'s).
        Images run up to ``batch_size`` at a time (None: as many as fill about a megapixel
        of input, :func:`default_batch_size`); the detections of an image do not depend
        on the batch size. ``tiles``: a tile side in pixels, to run each image in
        overlapping tiles too, for small objects (``tile_overlap`` of a tile's side, default
        0.2; :mod:`zoo.inference.tiles`), as ``zoo detect --tiles``; None runs the tiles the
        model was trained on (:attr:`tiles`), if any, 0 none."""
        if (batch_size is not None and batch_size < 1) or max_detections < 0:
            raise ValueError("need batch_size >= 1 and max_detections >= 0, got %r and %r"
                             % (batch_size, max_detections))
        tiled = run_tiling(tiles, tile_overlap, self.tiles)
        single = not isinstance(images, (list, tuple))
        # tiles are cut from the photo's own pixels, so a tiled run decodes it whole; an
        # untiled one decodes a large JPEG reduced to the size its input needs
        source = ImageList([images] if single else images, self.exif,
                           None if tiled else self.preprocessing)
        outputs = detector_outputs(self.runner, source, batch_size, tiled, score_threshold)
        results = [self.detections(rows, size, score_threshold, max_detections)
                   for _, rows, size in outputs]
        return results[0] if single else results

    def detections(self, rows, size, score_threshold, max_detections):
        """:class:`Detections` from one image's rows ``[class, score, x1, y1, x2, y2]`` (corners
        normalised to the image, real boxes only: :meth:`BatchRunner.outputs`) and its
        ``(width, height)``."""
        rows = rows[rows[:, 1] >= score_threshold]
        rows = rows[np.argsort(-rows[:, 1], kind="stable")[:max_detections]]
        width, height = size
        labels = rows[:, 0].astype(np.int64)
        return Detections(
            boxes=(rows[:, 2:6] * np.array([width, height, width, height])).astype(np.float32),
            scores=rows[:, 1].astype(np.float32), labels=labels,
            names=label_names(self.class_names, labels), frame=FRAMES[self.exif],
            category_ids=(None if self.category_ids is None
                          else np.array(self.category_ids, np.int64)[labels]))
