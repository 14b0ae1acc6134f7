#!/usr/bin/env python
"""Throughput of the SSD training data pipeline alone, ours beside GluonCV's.

Both sides decode, augment, normalise and batch the same image files into
float32 NCHW batches with padded labels, with the same number of workers, in one
process run, one after the other, each timed over the same number of batches
after warm-up. Ours is DetectionLoader + TrainTransform (worker threads).
GluonCV's is ``gluon.data.DataLoader`` (worker processes) over a dataset that
decodes the same files with ``mx.image.imread`` (record files: GluonCV's
``RecordFileDetection``), through ``SSDDefaultTrainTransform(width, height)``
and ``Tuple(Stack(), Pad(pad_val=-1))``. Prints images/s and CPU time per image
(all threads and worker processes) of each, and the ratios.

GluonCV's transform gets no anchors, so it computes no training targets: our
loader computes none either (our SSD matches anchors inside the graph), so both
sides do the same work.

Example:
    python tools/benchmark_data.py --data-shape 512 --batch-size 32 --num-workers 2
"""
import argparse
import collections
import os
import platform
import statistics
import sys
import time

import cv2
import mxnet as mx

from zoo.data import DetectionLoader, TrainTransform, embedded
from zoo.data.factory import KINDS, open_dataset


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", choices=KINDS, default="embedded")
    p.add_argument("--data-root", default=None,
                   help="default for embedded: output/shapes_<image-size>, generated if missing")
    p.add_argument("--split", default="train")
    p.add_argument("--image-size", type=int, default=448,
                   help="embedded only: side of the generated square JPEGs; 448x448 is about "
                        "the area of a 500x375 VOC image")
    p.add_argument("--num-images", type=int, default=64,
                   help="embedded only: images generated; batches cycle over them")
    p.add_argument("--data-shape", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-workers", type=int, default=len(os.sched_getaffinity(0)),
                   help="threads for ours, processes for GluonCV")
    p.add_argument("--batches", type=int, default=None,
                   help="timed batches per side; default: 5 per worker. GluonCV's workers each "
                        "make whole batches, so a multiple of --num-workers times them evenly")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed batches first, per side; default: one per worker, so both "
                        "pipelines are full when the clock starts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opencv-threads", type=int, default=None,
                   help="cv2.setNumThreads for our side (GluonCV's workers use MXNet's own "
                        "OpenCV); default: OpenCV's, one per core")
    p.add_argument("--compare", choices=("gluoncv", "none"), default="gluoncv")
    args = p.parse_args(argv)
    args.batches = 5 * args.num_workers if args.batches is None else args.batches
    args.warmup = args.num_workers if args.warmup is None else args.warmup
    if min(args.batch_size, args.num_workers, args.batches) < 1 or args.warmup < 0:
        p.error("--batch-size, --num-workers and --batches must be >= 1, --warmup >= 0")
    return args


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


def open_benchmark_dataset(args):
    """Our dataset for the chosen kind; the embedded one is generated at ``--image-size``."""
    if args.dataset == "embedded":
        root = args.data_root or os.path.join("output", "shapes_%d" % args.image_size)
        embedded.generate(root, num_train=args.num_images, num_val=0,
                          image_size=args.image_size)
        return open_dataset("voc", root, args.split)
    if args.data_root is None:
        raise SystemExit("--data-root is needed for --dataset %s" % args.dataset)
    return open_dataset(args.dataset, args.data_root, args.split)


def gluoncv_dataset(dataset, args):
    """The same images and labels in GluonCV's layout, decoded by MXNet."""
    if args.dataset == "rec":
        from gluoncv.data import RecordFileDetection

        return RecordFileDetection(os.path.join(args.data_root, args.split + ".rec"))
    return GluonCVImageFiles(dataset.records)


Timing = collections.namedtuple("Timing", "images seconds cpu_seconds")


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
    start, start_cpu = time.perf_counter(), cpu_seconds(pids)
    images = sum(materialise(next(batches)) for _ in range(count))
    return Timing(images, time.perf_counter() - start, cpu_seconds(pids) - start_cpu)


def time_ours(dataset, args, length):
    """Our loader's :class:`Timing`: numpy batches, complete when yielded."""
    loader = DetectionLoader(Cycled(dataset, length), args.batch_size,
                             TrainTransform(args.data_shape), seed=args.seed,
                             num_workers=args.num_workers)
    batches = loader.epoch(0)
    try:
        return time_batches(batches, args.warmup, args.batches, lambda batch: len(batch.data),
                            [os.getpid()])
    finally:
        batches.close()  # stops the worker threads


def time_gluoncv(dataset, args, length):
    """GluonCV's loader's :class:`Timing`; each batch's NDArrays are waited for."""
    from gluoncv.data.batchify import Pad, Stack, Tuple
    from gluoncv.data.transforms.presets.ssd import SSDDefaultTrainTransform

    transform = SSDDefaultTrainTransform(args.data_shape, args.data_shape)
    loader = mx.gluon.data.DataLoader(
        Cycled(gluoncv_dataset(dataset, args), length).transform(transform), args.batch_size,
        shuffle=True, batchify_fn=Tuple(Stack(), Pad(pad_val=-1)), last_batch="discard",
        num_workers=args.num_workers)

    def materialise(batch):
        data, label = batch
        data.wait_to_read()
        label.wait_to_read()
        return data.shape[0]
    # the pool's worker processes are only reachable through its private list
    pids = [os.getpid()] + [worker.pid for worker in loader._worker_pool._pool]
    batches = iter(loader)
    try:
        return time_batches(batches, args.warmup, args.batches, materialise, pids)
    finally:
        batches.close()
        del loader  # its __del__ terminates the worker processes


def cpu_model():
    """The processor's name as /proc/cpuinfo gives it, else the platform's word for it."""
    try:
        with open("/proc/cpuinfo") as stream:
            for line in stream:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown processor"


def describe_images(records):
    """The median image size and the range of sizes."""
    widths = [record.width for record in records]
    heights = [record.height for record in records]
    return "median %dx%d, %dx%d to %dx%d" % (
        statistics.median(widths), statistics.median(heights), min(widths), min(heights),
        max(widths), max(heights))


def report(label, timing):
    """Print one side's images/s and CPU time per image; returns both."""
    rate, cpu_ms = timing.images / timing.seconds, 1e3 * timing.cpu_seconds / timing.images
    print("%-46s %7.1f img/s %7.1f CPU ms/img  (%d images in %.2f s)"
          % (label, rate, cpu_ms, timing.images, timing.seconds))
    return rate, cpu_ms


def format_ratio(numerator, denominator):
    """``"N.NNx"``, or ``"n/a"`` when the run was too short for the clock to tick."""
    return "%.2fx" % (numerator / denominator) if denominator > 0 else "n/a"


def main(argv=None):
    args = parse_args(argv)
    if args.opencv_threads is not None:
        cv2.setNumThreads(args.opencv_threads)
    dataset = open_benchmark_dataset(args)
    print("machine: %d cores (%s), load average %.2f; %d workers; OMP_NUM_THREADS=%s, "
          "cv2 threads %d" % (len(os.sched_getaffinity(0)), cpu_model(), os.getloadavg()[0],
                              args.num_workers, os.environ.get("OMP_NUM_THREADS"),
                              cv2.getNumThreads()))
    print("images: %d distinct (%s); data shape %d; batch size %d"
          % (len(dataset), describe_images(dataset.records), args.data_shape, args.batch_size))
    length = (args.warmup + args.batches) * args.batch_size
    our_rate, our_cpu_ms = report("ours: DetectionLoader + TrainTransform",
                                  time_ours(dataset, args, length))
    if args.compare == "gluoncv":
        their_rate, their_cpu_ms = report("gluoncv: DataLoader + SSDDefaultTrainTransform",
                                          time_gluoncv(dataset, args, length))
        print("speed ratio ours / gluoncv: %s images/s; gluoncv / ours: %s CPU time per image"
              % (format_ratio(our_rate, their_rate), format_ratio(their_cpu_ms, our_cpu_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
