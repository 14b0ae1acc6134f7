"""Throughput of the SSD training data pipeline alone, ours beside GluonCV's.

Both sides decode, augment, normalise and batch the same image files into float32 NCHW
batches with padded labels, with the same number of workers, in one process run, one after
the other, each timed over the same number of batches after warm-up. Ours is
DetectionLoader + TrainTransform (worker threads). GluonCV's is ``gluon.data.DataLoader``
(worker processes) over a dataset that decodes the same files with ``mx.image.imread``
(record files: GluonCV's ``RecordFileDetection``), through
``SSDDefaultTrainTransform(width, height)`` and ``Tuple(Stack(), Pad(pad_val=-1))``.
Reports images/s and CPU time per image (all threads and worker processes) of each, and
the ratios.

GluonCV's transform gets no anchors, so it computes no training targets: our loader
computes none either (our SSD matches anchors inside the graph), so both sides do the same
work.
"""
import os
import statistics
from dataclasses import dataclass
from typing import Optional

import cv2
import mxnet as mx

from zoo.data import DetectionLoader, TrainTransform, embedded
from zoo.data.factory import open_dataset
from zoo_bench.options import DataBenchmarkOptions  # its options, defined without MXNet
from zoo_bench.timing import Stopwatch, environment, machine_line, print_line

__all__ = ["Cycled", "DataBenchmarkOptions", "GluonCVImageFiles", "benchmark_data",
           "cpu_seconds"]

@dataclass(frozen=True)
class Timing:
    images: int
    seconds: float
    cpu_seconds: float

    @property
    def images_per_s(self):
        return self.images / self.seconds

    @property
    def cpu_ms_per_image(self):
        return 1e3 * self.cpu_seconds / self.images


@dataclass(frozen=True)
class DataBenchmarkResult:
    ours: Timing
    gluoncv: Optional[Timing]   # None without the comparison


class Cycled(mx.gluon.data.Dataset):
    """A dataset repeated up to ``length`` items, so any number of batches fits in one epoch
    (no epoch boundary inside the timing) whatever the number of distinct images."""

    def __init__(self, dataset, length):
        self.dataset, self.length = dataset, length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return self.dataset[index % len(self.dataset)]


class GluonCVImageFiles(mx.gluon.data.Dataset):
    """Image files as GluonCV's VOCDetection serves them: decoded by ``mx.image.imread``
    (RGB NDArray), labels ``[x1, y1, x2, y2, class_id, difficult]`` in pixels."""

    def __init__(self, records):
        self.paths = [record.path for record in records]
        self.labels = [record.label()[:, [1, 2, 3, 4, 0, 5]] for record in records]

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        return mx.image.imread(self.paths[index]), self.labels[index]


def open_benchmark_dataset(options):
    """Our dataset for the chosen kind; the embedded one is generated at ``image_size`` into
    its own folder (generating into another size's folder would replace that dataset)."""
    if options.dataset == "embedded":
        root = options.data_root or os.path.join("output", "shapes_%d" % options.image_size)
        embedded.generate(root, num_train=options.num_images, num_val=0,
                          image_size=options.image_size)
        return open_dataset("voc", root, options.split, skip_bad=options.skip_bad)
    return open_dataset(options.dataset, options.data_root, options.split,
                        options.skip_bad, options.annotations, options.image_dir)


def gluoncv_dataset(dataset, options):
    """The same images and labels in GluonCV's layout, decoded by MXNet."""
    if options.dataset == "rec":
        from gluoncv.data import RecordFileDetection

        return RecordFileDetection(os.path.join(options.data_root, options.split + ".rec"))
    return GluonCVImageFiles(dataset.records)


def cpu_seconds(pids):
    """User plus system CPU time so far of processes ``pids``, all their threads, from /proc."""
    ticks = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def time_batches(batches, warmup, count, materialise, pids):
    """The :class:`Timing` of ``count`` batches after ``warmup``, CPU time summed over the
    processes ``pids``; ``materialise(batch)`` waits until a batch is complete and returns
    its size."""
    for _ in range(warmup):
        materialise(next(batches))
    watch, start_cpu = Stopwatch(), cpu_seconds(pids)
    images = sum(materialise(next(batches)) for _ in range(count))
    return Timing(images, watch(), cpu_seconds(pids) - start_cpu)


def time_ours(dataset, options, length):
    """Our loader's :class:`Timing`: numpy batches, complete when yielded."""
    loader = DetectionLoader(Cycled(dataset, length), options.batch_size,
                             TrainTransform(options.data_shape), seed=options.seed,
                             num_workers=options.workers)
    batches = loader.epoch(0)
    try:
        return time_batches(batches, options.warmup_batches, options.timed_batches,
                            lambda batch: len(batch.data), [os.getpid()])
    finally:
        batches.close()  # stops the worker threads


def time_gluoncv(dataset, options, length):
    """GluonCV's loader's :class:`Timing`; each batch's NDArrays are waited for."""
    from gluoncv.data.batchify import Pad, Stack, Tuple
    from gluoncv.data.transforms.presets.ssd import SSDDefaultTrainTransform

    transform = SSDDefaultTrainTransform(options.data_shape, options.data_shape)
    loader = mx.gluon.data.DataLoader(
        Cycled(gluoncv_dataset(dataset, options), length).transform(transform),
        options.batch_size, shuffle=True, batchify_fn=Tuple(Stack(), Pad(pad_val=-1)),
        last_batch="discard", num_workers=options.workers)

    def materialise(batch):
        data, label = batch
        data.wait_to_read()
        label.wait_to_read()
        return data.shape[0]
    # the pool's worker processes are only reachable through its private list
    pids = [os.getpid()] + [worker.pid for worker in loader._worker_pool._pool]
    batches = iter(loader)
    try:
        return time_batches(batches, options.warmup_batches, options.timed_batches,
                            materialise, pids)
    finally:
        batches.close()
        del loader  # its __del__ terminates the worker processes


def describe_images(records):
    """The median image size and the range of sizes."""
    widths = [record.width for record in records]
    heights = [record.height for record in records]
    return "median %dx%d, %dx%d to %dx%d" % (
        statistics.median(widths), statistics.median(heights), min(widths), min(heights),
        max(widths), max(heights))


def format_timing(label, timing):
    return ("%-46s %7.1f img/s %7.1f CPU ms/img  (%d images in %.2f s)"
            % (label, timing.images_per_s, timing.cpu_ms_per_image, timing.images,
               timing.seconds))


def format_ratio(numerator, denominator):
    """``"N.NNx"``, or ``"n/a"`` when the run was too short for the clock to tick."""
    return "%.2fx" % (numerator / denominator) if denominator > 0 else "n/a"


def benchmark_data(options, log=print_line):
    """Time our pipeline (and GluonCV's); each report line goes to ``log``. Returns a
    :class:`DataBenchmarkResult`."""
    if options.opencv_threads is not None:
        cv2.setNumThreads(options.opencv_threads)
    dataset = open_benchmark_dataset(options)
    log(machine_line("%d workers" % options.workers, "%s, cv2 threads %d"
                     % (environment("OMP_NUM_THREADS"), cv2.getNumThreads())))
    log("images: %d distinct (%s); data shape %d; batch size %d"
        % (len(dataset), describe_images(dataset.records), options.data_shape,
           options.batch_size))
    length = (options.warmup_batches + options.timed_batches) * options.batch_size
    ours = time_ours(dataset, options, length)
    log(format_timing("ours: DetectionLoader + TrainTransform", ours))
    if options.compare != "gluoncv":
        return DataBenchmarkResult(ours, None)
    theirs = time_gluoncv(dataset, options, length)
    log(format_timing("gluoncv: DataLoader + SSDDefaultTrainTransform", theirs))
    log("speed ratio ours / gluoncv: %s images/s; gluoncv / ours: %s CPU time per image"
        % (format_ratio(ours.images_per_s, theirs.images_per_s),
           format_ratio(theirs.cpu_ms_per_image, ours.cpu_ms_per_image)))
    return DataBenchmarkResult(ours, theirs)
