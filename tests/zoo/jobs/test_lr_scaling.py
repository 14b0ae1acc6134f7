"""The lr follows the batch: a run given no ``--lr`` takes its architecture's recipe lr
scaled linearly to its total batch (MMDetection's ``--auto-scale-lr``) and says so in its
first line; a given ``--lr`` is kept whatever the batch."""
import json
import os
import re
import subprocess
import sys

import cv2
import numpy as np
import pytest

from zoo import artifact
from zoo.architectures import ARCHITECTURES
from zoo.jobs.train import TrainOptions, learning_rate

from factories import ROOT, smooth_image
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
    assert lr == 0.003 and "lr 0.003 (as given, not scaled)" in first


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


def write_bird_photos(root, count, first_id):
    """A user's COCO data as the large-photos issue had it: ``count`` 1600x1200 JPEGs of one
    class, "bird" (category 16), image ids from ``first_id``, annotations at their own
    path; each photo a smooth background with 1-3 dark ellipses (the birds)."""
    os.makedirs(os.path.join(root, "photos"), exist_ok=True)
    rng = np.random.RandomState(first_id % 1000)
    images, annotations = [], []
    for index in range(count):
        image_id, name = first_id + index, "DSC%05d.jpg" % (first_id + index)
        photo = smooth_image(1200, 1600, image_id % 1000, 100, cv2.INTER_CUBIC)
        for _ in range(rng.randint(1, 4)):
            width, height = rng.randint(120, 500, size=2)
            x, y = rng.randint(0, 1600 - width), rng.randint(0, 1200 - height)
            cv2.ellipse(photo, (int(x + width / 2), int(y + height / 2)),
                        (int(width / 2), int(height / 2)), 0, 0, 360,
                        tuple(int(c) for c in rng.randint(0, 80, 3)), -1)
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": 16, "bbox": [int(x), int(y), int(width),
                                                             int(height)],
                                "area": int(width * height), "iscrowd": 0})
        cv2.imwrite(os.path.join(root, "photos", name), photo)
        images.append({"id": image_id, "file_name": name, "width": 1600, "height": 1200})
    path = os.path.join(root, "labels_%d.json" % first_id)
    with open(path, "w") as stream:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": 16, "name": "bird"}]}, stream)
    return path


@pytest.mark.slow
def test_the_fpn_trains_from_scratch_at_batch_2_at_its_scaled_lr(tmp_path):
    """The large-photos issue's run: ``faster_rcnn_fpn_resnet50`` from scratch at
    ``--data-shape 256``, batch 2, on 1600x1200 photos of one class. At the old default lr
    (0.01) the loss exploded at batch 11; the lr scaled to batch 2 (0.00125) trains 16
    batches on, the divergence check silent."""
    root = str(tmp_path / "birds")
    train = write_bird_photos(root, 32, 9000001)  # no held-out split: --val-split ""
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "train", "--network", "faster_rcnn_fpn_resnet50",
         "--dataset", "coco", "--data-root", root, "--annotations", train,
         "--image-dir", os.path.join(root, "photos"), "--val-split", "", "--data-shape",
         "256", "--batch-size", "2", "--epochs", "1", "--output-dir", str(tmp_path / "out")],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
        timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    first = next(line for line in done.stderr.splitlines() if "training " in line)
    assert "lr 0.00125 (the faster_rcnn_fpn recipe's 0.01 at batch 16" in first, first
    assert "diverg" not in done.stderr.lower() and "explod" not in done.stderr.lower()
