"""Training defaults that fit the machine and the data (issue 48, item 4): without
``--batch-size`` ``zoo train`` picks the batch (what fits the memory available, a quarter
of the training images at most) and scales the lr to it, both said in its first line; a
small data set loses no more than a remainder at the end of an epoch; a batch estimated not
to fit is refused in one line before anything is bound. The available memory is faked
through its seam, :func:`zoo.engine.memory.available_memory_mb`: nothing allocates GBs."""
import logging
import re

import pytest

from zoo import artifact
from zoo.architectures import ARCHITECTURES
from zoo.cli import main
from zoo.data.loader import DetectionLoader
from zoo.engine import memory
from zoo.engine.trainer import Trainer

NETWORK = "ssd_mobilenetv2_stride8"
TRAIN_IMAGES = 8                       # the shapes fixture's (tests/conftest.py)
PLENTY_MB = 10 ** 6
SCARCE_MB = memory.RUNTIME_MB + 150
"""Room for a process and a few 128-pixel images of the SSD, not for 8."""


def train(shapes, output, *flags):
    return main(["train", "--network", NETWORK, "--dataset", "voc", "--data-root", shapes,
                 "--data-shape", "128", "--epochs", "1", "--val-split", "",
                 "--data-threads", "1", "--output-dir", str(output), *flags])


def first_line(caplog):
    return next(record.getMessage() for record in caplog.records
                if record.getMessage().startswith("training " + NETWORK))


def with_memory(monkeypatch, mb):
    monkeypatch.setattr(memory, "available_memory_mb", lambda: mb)


def test_the_default_batch_fits_the_data_and_the_memory_and_the_lr_follows_it(
        shapes, tmp_path, caplog, monkeypatch):
    base_lr, base_batch = ARCHITECTURES["ssd"].recipe_lr
    chosen = {}
    for mb in (PLENTY_MB, SCARCE_MB):
        with_memory(monkeypatch, mb)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            assert train(shapes, tmp_path / str(mb)) == 0
        line = first_line(caplog)
        said = re.search(r"batch (\d+) \((.*): about ([0-9.]+) GB of the ([0-9.]+) GB "
                         r"available; --batch-size to choose\), lr ([0-9.e-]+) \(the ssd "
                         r"recipe's ([0-9.e-]+) at batch (\d+), scaled linearly to batch "
                         r"(\d+)", line)
        assert said, line
        batch = int(said.group(1))
        assert float(said.group(4)) == pytest.approx(mb / 1024, abs=0.05)
        assert (float(said.group(6)), int(said.group(7)), int(said.group(8))) == (
            base_lr, base_batch, batch)
        meta = artifact.read_meta(str(tmp_path / str(mb) / NETWORK), 1)
        assert meta["training"]["trainer"]["batch_size"] == batch
        assert meta["training"]["optimizer"]["lr"] == pytest.approx(base_lr * batch / base_batch)
        assert float(said.group(5)) == pytest.approx(meta["training"]["optimizer"]["lr"])
        chosen[mb] = (batch, said.group(2), float(said.group(3)))
    # plenty of memory: the data limits it, 4 steps an epoch; little: memory does
    assert chosen[PLENTY_MB][:2] == (TRAIN_IMAGES // 4, "a 4th of the %d training images"
                                     % TRAIN_IMAGES)
    assert chosen[SCARCE_MB][0] < chosen[PLENTY_MB][0]
    assert chosen[SCARCE_MB][2] * 1024 <= SCARCE_MB


def test_a_small_data_set_is_seen_whole_each_epoch(shapes, tmp_path, caplog, monkeypatch):
    """8 images at batch 5: the short last batch is filled from the epoch's start, not
    dropped (3 of 8 images unseen each epoch)."""
    with_memory(monkeypatch, PLENTY_MB)
    seen = []
    batch_indices = DetectionLoader.batch_indices

    def recorded(loader, epoch, order=None):
        batches = batch_indices(loader, epoch, order)
        seen.append({int(i) for indices, _ in batches for i in indices})
        return batches

    monkeypatch.setattr(DetectionLoader, "batch_indices", recorded)
    with caplog.at_level(logging.INFO):
        assert train(shapes, tmp_path / "run", "--batch-size", "5", "--epochs", "2") == 0
    epochs = seen[-2:]
    assert epochs and all(indices == set(range(TRAIN_IMAGES)) for indices in epochs), seen
    said = [record.getMessage() for record in caplog.records
            if record.getMessage().startswith("each epoch")]
    assert said == ["each epoch's last batch: its 3 images and 2 from the epoch's start, so "
                    "that all 8 images are seen each epoch at batch 5"], said


def test_a_batch_that_cannot_fit_is_refused_in_one_line_before_binding(
        shapes, tmp_path, capsys, monkeypatch):
    with_memory(monkeypatch, SCARCE_MB)

    def bound(*args, **kwargs):
        raise AssertionError("a refused batch must not be bound")

    monkeypatch.setattr(Trainer, "build_module", bound)
    assert train(shapes, tmp_path / "run", "--batch-size", "8") == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "Traceback" not in error[0], error
    said = re.search(r"^zoo train: error: batch 8 of %s at 128x128 needs about ([0-9.]+) GB to "
                     r"train \(estimated\), over 90%% of the ([0-9.]+) GB available: the "
                     r"largest that fits is (\d+) \(--batch-size \d+\)" % NETWORK, error[0])
    assert said, error[0]
    fits = int(said.group(3))
    assert 1 <= fits < 8
    # the batch named fits (it trains), the next one is refused as 8 was
    monkeypatch.undo()
    with_memory(monkeypatch, SCARCE_MB)
    assert train(shapes, tmp_path / "fits", "--batch-size", str(fits)) == 0
    capsys.readouterr()
    assert train(shapes, tmp_path / "next", "--batch-size", str(fits + 1)) == 1
    assert "the largest that fits is %d" % fits in capsys.readouterr().err
