"""The lr follows the batch: a run given no ``--lr`` takes its architecture's recipe lr
scaled linearly to its total batch (MMDetection's ``--auto-scale-lr``) and says so in its
first line; a given ``--lr`` is kept whatever the batch."""
import os
import re
import subprocess
import sys

import pytest

from zoo import artifact
from zoo.architectures import ARCHITECTURES
from zoo.jobs.train import TrainOptions, learning_rate

from factories import ROOT
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")


NETWORK = "ssd_mobilenetv2_stride8"


def _train(shapes, output, *flags):
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "train", "--network", NETWORK, "--dataset", "voc",
         "--data-root", shapes, "--data-shape", "128", "--epochs", "1", "--output-dir",
         output, *flags], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    first = next(line for line in done.stderr.splitlines() if "training " + NETWORK in line)
    meta = artifact.read_meta(os.path.join(output, NETWORK), 1)
    return first, meta["training"]["optimizer"]["lr"]


def test_the_recipe_lr_scales_with_the_batch_and_the_first_line_says_so(shapes, tmp_path):
    base_lr, base_batch = ARCHITECTURES["ssd"].recipe_lr
    first, lr = _train(shapes, str(tmp_path / "b4"), "--batch-size", "4")
    assert lr == pytest.approx(base_lr * 4 / base_batch)
    said = re.search(r"lr ([0-9.e-]+) \(the ssd recipe's ([0-9.e-]+) at batch (\d+), scaled "
                     r"linearly to batch 4", first)
    assert said, first
    assert float(said.group(1)) == pytest.approx(lr)
    assert (float(said.group(2)), int(said.group(3))) == (base_lr, base_batch)


def test_a_given_lr_is_kept_whatever_the_batch(shapes, tmp_path):
    first, lr = _train(shapes, str(tmp_path / "given"), "--batch-size", "4", "--lr", "0.003")
    assert lr == 0.003 and "lr 0.003 (--lr, not scaled)" in first


@pytest.mark.parametrize("kv_store, workers, batch", [
    ("local", 1, 8), ("dist_sync", 2, 16), ("dist_device_sync", 4, 32), ("dist_async", 2, 8)])
def test_the_total_batch_counts_synchronous_workers(kv_store, workers, batch):
    """dist_sync workers' gradients are averaged into one update of ``workers x B``
    samples; dist_async applies each worker's ``B`` alone."""
    for arch in ARCHITECTURES.values():
        base_lr, base_batch = arch.recipe_lr
        lr, note = learning_rate(TrainOptions(batch_size=8, kv_store=kv_store), arch, workers)
        assert lr == pytest.approx(base_lr * batch / base_batch), (arch.name, kv_store)
        assert ("batch %d" % batch) in note
