"""Batches of decoded, augmented samples, prepared in parallel ahead of use.

Reproducibility is per sample: the epoch's order comes from ``(seed, epoch)``
and each sample's ``RandomState`` from ``(seed, epoch, dataset index)``, so a
run resumed at epoch k sees exactly the batches an uninterrupted run sees, no
matter how many workers prepare them or in which order they finish.
"""
import collections
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from zoo.errors import DataError
from zoo.data.transforms import pad_batch

__all__ = ["Batch", "DetectionLoader", "position"]

LAST_BATCH_MODES = ("discard", "keep", "pad")
MAX_REPLACEMENTS = 32
"""How many items after a bad one ``skip_bad`` tries before it gives up on the epoch."""


class Batch(tuple):
    """A ``(data, label)`` pair that also knows which dataset items it holds.

    ``data`` is (B, 3, H, W) float32, ``label`` (B, M, 6) float32 padded with
    rows of -1. ``indices`` are the dataset indices of the B samples; the last
    ``pad`` of them only fill up the final batch and should be ignored.
    ``im_info`` is (B, 3) float32 rows ``[height, width, scale]`` of each image's
    valid region when the images were padded onto one canvas, else None.
    """

    def __new__(cls, data, label, indices, pad=0, im_info=None):
        batch = super().__new__(cls, (data, label))
        batch.indices, batch.pad, batch.im_info = indices, pad, im_info
        return batch

    @property
    def data(self):
        """The (B, 3, H, W) float32 images."""
        return self[0]

    @property
    def label(self):
        """The (B, M, 6) float32 labels, padded with rows of -1."""
        return self[1]


class DetectionLoader:
    """Iterate a detection dataset in batches through a transform.

    ``transform(image, label, rng)`` is called once per sample with that
    sample's own ``RandomState``, valid for that call only. Samples are
    prepared by ``num_workers`` threads (OpenCV and NumPy release the GIL) up
    to ``prefetch`` batches ahead, each copied by its worker straight into its
    batch's array (a canvas batch, see below, is assembled once all its samples
    are in). ``last_batch`` is ``"discard"`` (drop a short final batch),
    ``"keep"`` (yield it short) or ``"pad"`` (fill it with the epoch's first
    samples; ``Batch.pad`` says how many). With ``num_shards > 1`` each shard
    sees a disjoint ``len(dataset) // num_shards`` samples per epoch, so every
    distributed worker runs the same number of steps. ``max_objects`` fixes
    the label's M (a sample with more objects is an error); None pads each
    batch to its own largest sample.

    A transform with a ``size_divisor`` (the short-side ones of
    :mod:`zoo.data.transforms`) returns ``(data, label, scale)`` of varying sizes:
    each batch's images are then padded with zeros at the bottom and right onto a
    canvas whose sides are multiples of it, and ``Batch.im_info`` marks each valid
    region. Other transforms return ``(data, label)`` of one shape.

    A :class:`DataError` from the dataset (an image that does not decode, or is
    not the size its annotation states) stops the epoch, unless ``skip_bad``:
    then the bad item is replaced by the next readable item of the epoch's
    order, with augmentation drawn from its own key, so batches keep their
    shape and a resumed epoch is the same as an uninterrupted one. At the end
    of the epoch one warning gives the count and the first reason;
    ``last_skipped`` maps each bad item's index to its reason. More bad items than
    the share ``max_skipped`` of the epoch's is a :class:`DataError` at its end: the
    epoch trained on the few good images over and over.

    ``iter(loader)`` runs the next epoch (0, 1, ...; :meth:`set_epoch` moves
    it, e.g. when resuming); :meth:`epoch` runs a given epoch.
    """

    def __init__(self, dataset, batch_size, transform, shuffle=True, seed=0, num_workers=None,
                 max_objects=None, last_batch="discard", num_shards=1, shard_index=0,
                 prefetch=3, skip_bad=False, max_skipped=1.0):
        if last_batch not in LAST_BATCH_MODES:
            raise ValueError("last_batch must be one of %s, not %r"
                             % (", ".join(LAST_BATCH_MODES), last_batch))
        if not 0 <= shard_index < num_shards:
            raise ValueError("shard_index %d is not in [0, %d)" % (shard_index, num_shards))
        if batch_size < 1 or prefetch < 1 or not 0 <= seed < 2 ** 32:
            raise ValueError("need batch_size >= 1, prefetch >= 1 and 0 <= seed < 2**32")
        self.dataset, self.batch_size, self.transform = dataset, batch_size, transform
        self.shuffle, self.seed = shuffle, seed
        self.num_workers = num_workers or os.cpu_count() or 1
        self.max_objects, self.last_batch, self.prefetch = max_objects, last_batch, prefetch
        self.num_shards, self.shard_index = num_shards, shard_index
        self.skip_bad, self.max_skipped, self.last_skipped = skip_bad, max_skipped, {}
        self.size_divisor = getattr(transform, "size_divisor", None)
        self.next_epoch = 0

    def set_epoch(self, epoch):
        """Make the next ``iter(loader)`` run ``epoch``."""
        self.next_epoch = epoch

    def __iter__(self):
        """Run the next epoch and advance the epoch counter."""
        epoch, self.next_epoch = self.next_epoch, self.next_epoch + 1
        return self.epoch(epoch)

    def __len__(self):
        full, rest = divmod(len(self.epoch_items(self.next_epoch)) // self.num_shards,
                            self.batch_size)
        return full + (1 if rest and self.last_batch != "discard" else 0)

    def epoch_items(self, epoch):
        """The dataset indices ``epoch`` visits, in index order: every item, or those a
        dataset that draws its items per epoch draws (its ``epoch_items(seed, epoch)``: a
        tiled one's, :class:`zoo.data.tiles.TiledDataset`), as many every epoch."""
        draw = getattr(self.dataset, "epoch_items", None)
        return np.arange(len(self.dataset)) if draw is None else draw(self.seed, epoch)

    def sample_order(self, epoch):
        """The dataset indices this shard visits in ``epoch``, in order."""
        items = self.epoch_items(epoch)
        size = len(items)
        # The order's seed key [seed, epoch] is shorter than any sample's, so never equal to one.
        order = (items[np.random.RandomState([self.seed, epoch]).permutation(size)]
                 if self.shuffle else items)
        per_shard = size // self.num_shards
        return order[:per_shard * self.num_shards][self.shard_index::self.num_shards]

    def batch_indices(self, epoch, order=None):
        """``(indices, pad)`` of every batch of ``epoch``, following ``last_batch``."""
        order = self.sample_order(epoch) if order is None else order
        batches = []
        for start in range(0, len(order), self.batch_size):
            indices = order[start:start + self.batch_size]
            pad = self.batch_size - len(indices)
            if pad and self.last_batch == "discard":
                break
            if pad and self.last_batch == "pad":
                indices = np.concatenate([indices, np.resize(order, pad)])
            else:
                pad = 0
            batches.append((indices, pad))
        return batches

    def epoch(self, epoch):
        """Iterate the batches of ``epoch`` (a :class:`Batch` each)."""
        order = self.sample_order(epoch)
        batches = collections.deque(self.batch_indices(epoch, order))
        pending = collections.deque()
        bad = {}  # dataset index -> reason, filled by the workers
        with ThreadPoolExecutor(self.num_workers, thread_name_prefix="zoo-loader") as pool:
            try:
                while batches or pending:
                    while batches and len(pending) <= self.prefetch:  # next + prefetch ahead
                        indices, pad = batches.popleft()
                        data = (BatchData(len(indices)) if self.size_divisor is None
                                else CanvasBatchData(len(indices), self.size_divisor))
                        pending.append((indices, pad, data, [
                            pool.submit(self.sample_into, data, slot, epoch, index, order, bad)
                            for slot, index in enumerate(indices)]))
                    indices, pad, data, futures = pending.popleft()
                    labels = [future.result() for future in futures]
                    yield self.collate(data, labels, indices, pad)
            finally:
                for _, _, _, futures in pending:
                    for future in futures:
                        future.cancel()
        self.last_skipped = bad
        if bad:
            first = min(bad, key=lambda index: position(order, index))
            if len(bad) > self.max_skipped * len(order):
                raise DataError(
                    "%s: epoch %d: %d of its %d images could not be read (%.0f%%), more than "
                    "max_skipped %g (--max-skipped) allows; first: %s" % (
                        self.dataset.source or repr(self.dataset), epoch, len(bad),
                        len(order), 100.0 * len(bad) / len(order), self.max_skipped,
                        bad[first]))
            warnings.warn("epoch %d: skipped %d bad item%s, each replaced by the next readable "
                          "one; first: %s" % (epoch, len(bad), "" if len(bad) == 1 else "s",
                                              bad[first]), stacklevel=2)

    def sample(self, epoch, index, order=None, bad=None):
        """Item ``index`` of the dataset through the transform, with its own RandomState.

        With ``skip_bad``, a bad item is recorded in ``bad`` and replaced (see the class)."""
        index = int(index)
        try:
            item, key = self.dataset[index], (index,)
        except DataError as err:
            if not self.skip_bad:
                err.skippable = True  # the command line's error names --skip-bad
                raise
            bad.setdefault(index, str(err))
            replacement, item = self.replacement(index, order, bad)
            key = (replacement, index)  # not the replacement's own key: no duplicate sample
        return self.transform(*item, sample_rng(self.seed, epoch, *key))

    def replacement(self, index, order, bad):
        """``(index, item)`` of the first readable item after ``index`` in ``order``."""
        start = position(order, index)
        for step in range(1, min(len(order), MAX_REPLACEMENTS + 1)):
            candidate = int(order[(start + step) % len(order)])
            try:
                return candidate, self.dataset[candidate]
            except DataError as err:
                bad.setdefault(candidate, str(err))
        raise DataError("no readable item among the %d after dataset item %d in the epoch's "
                        "order; it was skipped as: %s"
                        % (min(len(order) - 1, MAX_REPLACEMENTS), index, bad[index]))

    def sample_into(self, batch_data, slot, epoch, index, order=None, bad=None):
        """Put item ``index``'s transform output in ``batch_data`` at ``slot``; returns its
        label."""
        sample = self.sample(epoch, index, order, bad)
        batch_data.put(slot, sample)
        return sample[1]

    def collate(self, batch_data, labels, indices, pad):
        """A :class:`Batch` of the batch's data and labels, labels padded with -1 rows."""
        counts = [len(label) for label in labels]
        width = max(counts, default=0)
        if self.max_objects is not None:
            if width > self.max_objects:
                index = indices[counts.index(width)]
                raise DataError("dataset item %d has %d objects after the transform, more than "
                                "max_objects=%d" % (index, width, self.max_objects))
            width = self.max_objects
        padded = np.full((len(labels), max(width, 1), 6), -1, dtype=np.float32)
        for row, label in zip(padded, labels):
            row[:len(label)] = label
        data, im_info = batch_data.arrays()
        return Batch(data, padded, np.asarray(indices), pad, im_info)


_thread_rng = threading.local()


def sample_rng(seed, epoch, *key):
    """Sample ``key``'s RandomState in ``epoch`` (the key is the dataset index, or a
    replacement's index and the bad item's): this thread's one, reseeded with
    ``[seed, epoch, *key]``, which gives the stream ``RandomState([seed, epoch, *key])``
    gives. A new RandomState would first seed itself from OS entropy (0.3 ms, holding the
    GIL) only to be reseeded; reseeding alone is 15 times cheaper."""
    rng = getattr(_thread_rng, "rng", None)
    if rng is None:
        rng = _thread_rng.rng = np.random.RandomState()
    rng.seed([seed, epoch, *key])
    return rng


def position(order, index):
    """Where dataset item ``index`` first comes in an epoch's ``order``."""
    return int(np.flatnonzero(order == index)[0])


class BatchData:
    """One batch's data array, which the workers fill in place as their samples finish, so
    the main thread copies nothing; whichever sample finishes first sets its shape and dtype."""

    def __init__(self, size):
        self.size, self.array = size, None
        self._lock = threading.Lock()

    def put(self, slot, sample):
        """Copy one sample's data (a transform output's first item) into ``slot``."""
        data = sample[0]
        with self._lock:
            if self.array is None:
                self.array = np.empty((self.size,) + data.shape, dtype=data.dtype)
        if data.shape != self.array.shape[1:]:
            raise ValueError("a sample's data is %s but the batch's first was %s"
                             % (data.shape, self.array.shape[1:]))
        self.array[slot] = data

    def arrays(self):
        """``(data, im_info)``: the filled array, and None as the images fill it whole."""
        return self.array, None


class CanvasBatchData:
    """One batch's short-side samples ``(data, label, scale)``, padded onto their canvas
    (:func:`zoo.data.transforms.pad_batch`) once all are in, as its size depends on all."""

    def __init__(self, size, size_divisor):
        self.samples, self.size_divisor = [None] * size, size_divisor

    def put(self, slot, sample):
        self.samples[slot] = sample

    def arrays(self):
        """``(data, im_info)`` of the canvas."""
        return pad_batch(self.samples, self.size_divisor)
