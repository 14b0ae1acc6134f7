"""DetectionLoader: coverage, order, reproducibility, resumption, shards, padding, errors."""
import threading
import time

import numpy as np
import pytest

from zoo.data import Batch, DetectionLoader, TrainTransform, VOCDataset, embedded
from zoo.errors import DataError


class NumberedDataset:
    """Item ``i`` is a 4x4 image filled with ``i`` and ``i % 3 + 1`` boxes of class ``i % 5``."""

    def __init__(self, size, broken=None):
        self.size, self.broken, self.calls = size, broken, 0

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        self.calls += 1
        if index == self.broken:
            raise DataError("item %d: broken on purpose" % index)
        label = np.tile([[index % 5, 1, 1, 3, 3, 0]], (index % 3 + 1, 1)).astype(np.float32)
        return np.full((4, 4, 3), index, dtype=np.uint8), label


def noisy_identity(image, label, rng):
    """CHW float image plus one random number per sample, so augmentation draws are visible."""
    return image.transpose(2, 0, 1).astype(np.float32) + rng.uniform(0, 0.5), label


def item_ids(batch):
    """The dataset index of each sample in a batch, read back from its pixels."""
    return np.floor(batch.data[:, 0, 0, 0]).astype(int).tolist()


def run_epoch(loader, epoch):
    """All batches of one epoch."""
    return list(loader.epoch(epoch))


def test_every_sample_once_per_epoch_and_batches_differ():
    loader = DetectionLoader(NumberedDataset(23), 4, noisy_identity, seed=0, num_workers=2,
                             last_batch="keep")
    batches = run_epoch(loader, 0)
    assert len(batches) == len(loader) == 6 and len(batches[-1].data) == 3
    seen = [index for batch in batches for index in item_ids(batch)]
    assert sorted(seen) == list(range(23))
    assert seen == [i for batch in batches for i in batch.indices.tolist()]
    for first, second in zip(batches, batches[1:]):
        assert not np.array_equal(first.data[:3], second.data[:3])


def test_same_seed_same_batches_whatever_the_workers():
    dataset = NumberedDataset(30)
    one = run_epoch(DetectionLoader(dataset, 5, noisy_identity, seed=4, num_workers=1), 2)
    three = run_epoch(DetectionLoader(dataset, 5, noisy_identity, seed=4, num_workers=3,
                                      prefetch=1), 2)
    for ours, theirs in zip(one, three):
        np.testing.assert_array_equal(ours.data, theirs.data)
        np.testing.assert_array_equal(ours.label, theirs.label)
    other_seed = run_epoch(DetectionLoader(dataset, 5, noisy_identity, seed=5), 2)
    assert item_ids(other_seed[0]) != item_ids(one[0])


def test_epochs_reshuffle_and_resume_exactly():
    dataset = NumberedDataset(30)
    loader = DetectionLoader(dataset, 6, noisy_identity, seed=1)
    uninterrupted = [list(loader) for _ in range(3)]
    assert item_ids(uninterrupted[0][0]) != item_ids(uninterrupted[1][0])
    resumed = DetectionLoader(dataset, 6, noisy_identity, seed=1)
    resumed.set_epoch(2)
    for ours, theirs in zip(list(resumed), uninterrupted[2]):
        np.testing.assert_array_equal(ours.data, theirs.data)
    # a sample's augmentation depends on the epoch too
    epoch_noise = {}
    for epoch, batches in enumerate(uninterrupted):
        for batch in batches:
            for index, value in zip(item_ids(batch), batch.data[:, 0, 0, 0]):
                epoch_noise.setdefault(index, []).append(value)
    assert all(len(set(values)) == 3 for values in epoch_noise.values())


def test_without_shuffle_order_is_the_dataset_order():
    loader = DetectionLoader(NumberedDataset(10), 4, noisy_identity, shuffle=False)
    assert [item_ids(batch) for batch in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_shards_are_disjoint_and_equal():
    dataset = NumberedDataset(31)
    shards = [DetectionLoader(dataset, 3, noisy_identity, seed=2, num_shards=4, shard_index=i)
              for i in range(4)]
    orders = [shard.sample_order(5) for shard in shards]
    assert all(len(order) == 7 for order in orders) and len(set(map(len, shards))) == 1
    union = np.concatenate(orders)
    assert len(set(union.tolist())) == 28
    for order, shard in zip(orders, shards):
        assert [i for batch in shard.epoch(5) for i in item_ids(batch)] == order[:6].tolist()


def test_last_batch_modes_and_label_padding():
    dataset = NumberedDataset(10)
    assert len(DetectionLoader(dataset, 4, noisy_identity, last_batch="discard")) == 2
    padded = run_epoch(DetectionLoader(dataset, 4, noisy_identity, shuffle=False,
                                       last_batch="pad", max_objects=5), 0)
    assert [batch.pad for batch in padded] == [0, 0, 2]
    assert item_ids(padded[-1]) == [8, 9, 0, 1]
    label = padded[0].label
    assert label.shape == (4, 5, 6) and label.dtype == np.float32
    np.testing.assert_array_equal(label[0, 1:], -1)
    np.testing.assert_array_equal(label[2, :3, 0], 2)
    np.testing.assert_array_equal(label[2, 3:], -1)
    free = run_epoch(DetectionLoader(dataset, 2, noisy_identity, shuffle=False), 0)
    assert [batch.label.shape[1] for batch in free] == [2, 3, 3, 2, 3]
    data, label = free[0]
    assert isinstance(free[0], Batch) and data is free[0].data and label is free[0].label


def test_too_many_objects_and_bad_items_raise_data_errors():
    with pytest.raises(DataError, match="has 3 objects after the transform, more than "
                                        "max_objects=2"):
        run_epoch(DetectionLoader(NumberedDataset(6), 3, noisy_identity, max_objects=2), 0)
    with pytest.raises(DataError, match="item 4: broken on purpose"):
        run_epoch(DetectionLoader(NumberedDataset(12, broken=4), 3, noisy_identity), 0)
    with pytest.raises(ValueError, match="last_batch"):
        DetectionLoader(NumberedDataset(4), 2, noisy_identity, last_batch="rollover")


def test_workers_prepare_batches_ahead():
    dataset = NumberedDataset(40)
    iterator = iter(DetectionLoader(dataset, 4, noisy_identity, num_workers=2, prefetch=3))
    next(iterator)
    deadline = time.time() + 10
    while dataset.calls < 16 and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert dataset.calls == 16  # this batch and three more, not the whole epoch
    iterator.close()
    assert not any(t.name.startswith("zoo-loader") for t in threading.enumerate())


def test_training_pipeline_end_to_end(tmp_path):
    root = embedded.generate(str(tmp_path / "shapes"), num_train=12, num_val=2, image_size=128)
    loader = DetectionLoader(VOCDataset(root, "train"), 4, TrainTransform(96), seed=0,
                             max_objects=embedded.MAX_OBJECTS)
    batches = list(loader)
    assert len(batches) == 3
    for data, label in batches:
        assert data.shape == (4, 3, 96, 96) and data.dtype == np.float32
        assert label.shape == (4, embedded.MAX_OBJECTS, 6)
        real = label[label[:, :, 0] >= 0]
        assert len(real) >= 4 and np.all((real[:, 1:5] >= 0) & (real[:, 1:5] <= 1))


def test_batches_hold_exactly_each_samples_transform(tmp_path):
    root = embedded.generate(str(tmp_path / "shapes"), num_train=7, num_val=1, image_size=96)
    dataset, transform = VOCDataset(root, "train"), TrainTransform(64)
    loader = DetectionLoader(dataset, 3, transform, seed=5, num_workers=2, last_batch="pad")
    for batch in loader.epoch(1):
        assert batch.data.shape == (3, 3, 64, 64) and batch.data.flags.c_contiguous
        for row, index in enumerate(batch.indices):
            image, label = dataset[index]
            data, label = transform(image, label, np.random.RandomState([5, 1, index]))
            np.testing.assert_array_equal(batch.data[row], data)
            np.testing.assert_array_equal(batch.label[row, :len(label)], label)


def test_samples_of_different_shapes_are_an_error():
    def ragged(image, label, rng):
        return np.zeros((1 + image[0, 0, 0] % 2, 2), dtype=np.float32), label
    with pytest.raises(ValueError, match=r"a sample's data is \(\d, 2\) but the batch's first"):
        run_epoch(DetectionLoader(NumberedDataset(4), 2, ragged, shuffle=False), 0)
