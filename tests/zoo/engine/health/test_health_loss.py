"""Training health, the loss side (zoo.engine.health.loss, .batches, .dynamics): the
initial loss against the trivial predictor's, repeated batches, spikes, plateaus and zero
losses, each injected through `zoo train` on data the zoo did not make; a healthy run on the
embedded shapes data (what `make demo` trains) prints no health warning; `zoo plot-log`
marks the warnings in their epochs; the cost benchmark runs."""
import json
import logging
import math
import os
import re
import warnings

import cv2
import numpy as np
import pytest

from zoo import artifact
from zoo.cli import main
from zoo.data import DetectionLoader
from zoo.engine.health import dynamics
from zoo.engine.health.dynamics import find_plateau
from zoo.engine.health.loss import terms
from zoo.errors import HealthWarning

NETWORK = "ssd_mobilenetv2_stride8"
CATEGORIES = {44: "circle", 2: "square", 9: "star"}
"""Our own ids; the names are the embedded data's, so --init-from keeps their class rows."""


def write_coco(root, count=8, seed=5):
    """``root/train.json`` and ``root/images/*.png``: ``count`` images of odd sizes with one
    to three filled shapes each, boxes as COCO's x, y, w, h in pixels."""
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(root, "images"))
    images, annotations = [], []
    for index in range(count):
        height, width = 97 + 11 * (index % 3), 133 - 7 * (index % 4)
        image = rng.randint(90, 160, (height, width, 3)).astype(np.uint8)
        image_id = 7001 + 13 * index
        for _ in range(rng.randint(1, 4)):
            w, h = rng.randint(24, 55), rng.randint(22, 50)
            x, y = rng.randint(0, width - w), rng.randint(0, height - h)
            category = list(CATEGORIES)[rng.randint(len(CATEGORIES))]
            colour = tuple(int(c) for c in rng.randint(0, 256, 3))
            if CATEGORIES[category] == "circle":
                cv2.ellipse(image, (x + w // 2, y + h // 2), (w // 2, h // 2), 0, 0, 360,
                            colour, -1)
            else:
                cv2.rectangle(image, (x, y), (x + w - 1, y + h - 1), colour, -1)
            annotations.append({"id": len(annotations) + 300, "image_id": image_id,
                                "category_id": category, "bbox": [x, y, w, h],
                                "area": w * h, "iscrowd": 0})
        name = "img_%03d.png" % index
        cv2.imwrite(os.path.join(root, "images", name), image)
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})
    with open(os.path.join(root, "train.json"), "w") as stream:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": i, "name": n} for i, n in CATEGORIES.items()]},
                  stream)
    return root


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    return write_coco(str(tmp_path_factory.mktemp("coco") / "mine"))


class Lines(logging.Handler):
    """The zoo.train log's messages."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def train(output, data, *flags, dataset="coco", epochs=1):
    """``zoo train`` in this process; returns ``(exit code, health warnings, log lines)``."""
    if dataset == "coco":
        data_flags = ["--dataset", "coco", "--data-root", data, "--annotations",
                      os.path.join(data, "train.json"), "--image-dir",
                      os.path.join(data, "images")]
    else:
        data_flags = ["--dataset", dataset, "--data-root", data]
    lines, logger = Lines(), logging.getLogger("zoo.train")
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)  # under pytest the root logger's level is WARNING
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = main(["train", *data_flags, "--val-split", "", "--data-shape", "192",
                         "--batch-size", "2", "--epochs", str(epochs), "--data-threads", "1",
                         "--output-dir", str(output), "--no-progress",
                         *(["--network", NETWORK] if "--init-from" not in flags else []),
                         *flags])
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    health = [str(w.message) for w in caught if issubclass(w.category, HealthWarning)]
    return code, health, lines.messages


def health_line(messages):
    return next(m for m in messages if m.startswith("health: "))


@pytest.fixture(scope="module")
def healthy(shapes, tmp_path_factory):
    """A healthy run on the embedded data; its artifact is the fine-tuning tests' source."""
    output = tmp_path_factory.mktemp("healthy")
    return output, train(output, shapes, dataset="voc", epochs=2)


def test_a_healthy_run_prints_no_health_warning(healthy):
    output, (code, health, messages) = healthy
    assert code == 0 and health == []
    first = next(m for m in messages if m.startswith("initial loss "))
    ratio = float(re.search(r", ([\d.]+)x the trivial predictor's", first).group(1))
    # SSD's hard-negative mining starts it above the trivial loss (1.13x-1.37x measured).
    assert 1.0 < ratio < 2.0
    assert re.search(r"cls_loss [\d.]+ against 1\.61 = ln 5", first), first
    line = health_line(messages)
    assert "initial loss ok (%.2fx trivial)" % ratio in line
    assert "repeated batches ok (8 distinct images an epoch)" in line
    assert "spikes ok" in line and "plateau ok" in line and "zero loss ok" in line
    with open(os.path.join(str(output), NETWORK + "-health.json")) as stream:
        record = json.load(stream)
    assert record["warnings"] == [] and record["checks"]["initial loss"]["status"] == "ok"


def test_the_checks_change_nothing_in_training(healthy, shapes, tmp_path):
    # The initial-loss check's extra forward pass leaves the parameters, batch-norm
    # statistics and the target operators' random draws as they were.
    output, _ = healthy
    assert train(tmp_path, shapes, "--no-health", dataset="voc", epochs=2)[:2] == (0, [])
    logs = [open(os.path.join(str(folder), NETWORK + "-log.csv")).read().splitlines()
            for folder in (output, tmp_path)]
    losses = [[line.split(",")[3:5] for line in log[1:]] for log in logs]
    assert losses[0] == losses[1] and len(losses[0]) == 2
    with open(os.path.join(str(tmp_path), NETWORK + "-health.json")) as stream:
        assert json.load(stream)["checks"] == {}


def scaled_class_head(source, target, factor):
    """``target``: ``source``'s artifact with its class layers' weights times ``factor``."""
    saved = artifact.load(source)
    args = {name: array * factor if re.match(r"head\d+_cls_weight$", name) else array
            for name, array in saved.arg_params.items()}
    artifact.save(target, 1, saved.model, args, saved.aux_params)
    return target



def test_only_classification_terms_are_named_as_logs():
    # 2.8332 is a box term near ln 17 by chance (ssd_resnet50, seed 0, measured)
    line = terms({"cls_loss": 7.88, "box_loss": 6.71},
                 {"cls_loss": math.log(5), "box_loss": math.log(17)})
    assert line == "cls_loss 7.88 against 1.61 = ln 5, box_loss 6.71 against 2.83"


def test_a_class_head_100x_too_large_is_named_at_the_first_step(healthy, coco, tmp_path):
    output, _ = healthy
    source = scaled_class_head(os.path.join(str(output), NETWORK), str(tmp_path / "src" / "x"),
                               100.0)
    code, health, messages = train(tmp_path / "out", coco, "--init-from", source)
    assert code == 0
    assert len(health) == 1, health
    found = re.fullmatch(
        r"initial loss: the first loss ([\d.]+) \(cls_loss ([\d.]+), box_loss [\d.]+\) is "
        r"([\d.]+)x the trivial predictor's ([\d.]+) on the same batch \(equal class scores, "
        r"zero box offsets: cls_loss 1\.39, box_loss [\d.]+\); healthy ssd starts measure "
        r"under 3x; this run is fine-tuned: the --init-from artifact's class or box layers "
        r"are broken, start from another epoch \(--init-epoch\) or another artifact",
        health[0])
    assert found, health[0]
    first, cls_loss, ratio, trivial = map(float, found.groups())
    assert ratio > 5 and cls_loss > 5 * math.log(4)
    assert first / trivial == pytest.approx(ratio, rel=0.05)
    assert "initial loss warning" in health_line(messages)


def test_boxes_read_as_pixels_but_normalised_make_absurd_box_targets(coco, tmp_path,
                                                                    monkeypatch):
    # Boxes normalised to [0, 1] where pixels belong (COCO's x, y, w, h divided by the image
    # size), injected behind the data census, which refuses them in the files.
    epoch_batches = DetectionLoader.epoch

    def normalised(self, epoch):
        for batch in epoch_batches(self, epoch):
            boxes = batch.label[:, :, 1:5]
            boxes[batch.label[:, :, 0] >= 0] /= batch.data.shape[-1]
            yield batch

    monkeypatch.setattr(DetectionLoader, "epoch", normalised)
    code, health, _ = train(tmp_path, coco, "--batch-size", "4")
    assert code == 0
    found = [re.fullmatch(
        r"initial loss: the box targets themselves are far off on the first batch: with zero "
        r"box offsets box_loss is ([\d.]+), where healthy data measures under 12: the anchors "
        r"fit no box; are the annotations' boxes in pixels of their images, as x1,y1,x2,y2 "
        r"\(COCO: x,y,w,h\)\? look at the first batch's picture, or zoo check-data", message)
        for message in health]
    assert any(found), health
    assert float(next(f for f in found if f).group(1)) > 20


def test_a_loader_that_repeats_one_batch(coco, tmp_path, monkeypatch):
    epoch_batches = DetectionLoader.epoch

    def same_batch(self, epoch):
        batches = epoch_batches(self, epoch)
        first = next(batches)
        batches.close()
        for _ in range(len(self)):
            yield first

    monkeypatch.setattr(DetectionLoader, "epoch", same_batch)
    code, health, messages = train(tmp_path, coco)
    assert code == 0
    assert len(health) == 1, health
    assert re.fullmatch(
        r"repeated batches: epoch 1: batch 2 repeats batch 1 exactly \(the same items \d+ "
        r"\(.*img_\d+\.png\), \d+ \(.*img_\d+\.png\) and the same tensor\); a loader gives "
        r"each item once an epoch: check the loader \(a custom one\?\) and the split's list",
        health[0]), health[0]


def test_an_epoch_cut_short_sees_few_distinct_images(coco, tmp_path, monkeypatch):
    epoch_batches = DetectionLoader.epoch

    def first_of_each(self, epoch):
        yield next(iter(epoch_batches(self, epoch)))

    monkeypatch.setattr(DetectionLoader, "epoch", first_of_each)
    code, health, _ = train(tmp_path, coco)
    assert code == 0
    assert health == ["repeated batches: epoch 1 saw 2 distinct images of the 8 the split "
                      "holds (4 steps of 2): the loader stops early or draws from a part of "
                      "the split; check the loader and the split's list"]


def test_a_huge_lr_spike_is_judged_against_the_run(coco, tmp_path):
    code, health, messages = train(tmp_path, coco, "--lr", "3", "--epochs", "2")
    spikes = [m for m in health if m.startswith("spikes: ")]
    assert spikes, (code, health)
    found = re.fullmatch(
        r"spikes: the step loss jumped to ([\d.e+]+) at epoch \d, batch \d \((cls|box)_loss the "
        r"largest term, [\d.e+]+\): ([\d.]+)x the median ([\d.e+]+) of the last \d+ steps? and "
        r"([\d.]+)x the trivial predictor's ([\d.]+); lower --lr \(now 3\), add "
        r"--warmup-epochs or add --clip-gradient", spikes[0])
    assert found, spikes[0]
    loss, over_median, median, over_trivial, trivial = (
        float(found.group(i)) for i in (1, 3, 4, 5, 6))
    assert over_median > 3 and over_trivial > 2
    assert loss / median == pytest.approx(over_median, rel=0.05)


def test_every_box_vanishing_makes_zero_losses_that_are_named(coco, tmp_path, monkeypatch):
    # The loader's labels lose every box after the first batch (as boxes normalised to
    # [0, 1] vanish in the transform; the first batch passes the first-batch check).
    epoch_batches = DetectionLoader.epoch

    def boxes_vanish(self, epoch):
        for index, batch in enumerate(epoch_batches(self, epoch)):
            if epoch or index:
                batch.label[:] = -1
            yield batch

    monkeypatch.setattr(DetectionLoader, "epoch", boxes_vanish)
    code, health, _ = train(tmp_path, coco, "--epochs", "3")
    assert code == 0
    assert health == [
        "zero loss: cls_loss and box_loss have been exactly 0 for 10 steps (up to epoch 3, "
        "batch 3): no box reaches the loss; every box may vanish in the transform (boxes "
        "normalised to [0, 1] read as pixels?), or no anchor matches one: look at the first "
        "batch's picture, or run zoo check-data"]


def test_a_stuck_loss_is_reported_with_its_noise_lr_and_schedule(coco, tmp_path, monkeypatch):
    # Shorter plateaus than a real run needs (PLATEAU_MIN_STEPS), at an lr that moves nothing.
    monkeypatch.setattr(dynamics, "PLATEAU_MIN_STEPS", 8)
    monkeypatch.setattr(dynamics, "BLOCK_MIN", 4)
    code, health, messages = train(tmp_path, coco, "--lr", "1e-9", "--epochs", "2")
    assert code == 0
    assert len(health) == 1, health
    assert re.fullmatch(
        r"plateau: the loss has been stuck for 8 steps \(2 epochs\) at [\d.]+ \([\d.]+x the "
        r"trivial predictor's loss\): it moved [-+][\d.e-]+, within the noise of \+-[\d.e-]+; "
        r"lr 1e-09, no lr drop is scheduled before the run ends \(--lr-steps\); .*", health[0])
    assert "plateau warning" in health_line(messages)


def test_plot_log_marks_the_warnings_in_their_epochs(tmp_path, capsys):
    prefix = str(tmp_path / "run")
    with open(prefix + "-log.csv", "w") as stream:
        stream.write("epoch,lr,samples_per_sec,cls_loss,box_loss,val_map\n"
                     "1,0.01,5,2.0,3.0,\n2,0.01,5,1.5,2.5,0.2\n3,0.01,5,1.4,2.4,0.3\n")
    assert main(["plot-log", prefix + "-log.csv", "--output", prefix + "-plain.png"]) == 0
    assert capsys.readouterr().out == prefix + "-plain.png\n"
    with open(prefix + "-health.json", "w") as stream:
        json.dump({"checks": {}, "pictures": [], "warnings": [
            {"check": "spikes", "epoch": 2, "message": "..."},
            {"check": "plateau", "epoch": 3, "message": "..."}]}, stream)
    assert main(["plot-log", prefix + "-log.csv"]) == 0
    assert capsys.readouterr().out == "%s-log.png\n2 health warnings of %s-health.json " \
                                      "marked\n" % (prefix, prefix)
    plain, marked = (cv2.imread(prefix + name) for name in ("-plain.png", "-log.png"))
    red = [np.count_nonzero((image[:, :, 2] > 180) & (image[:, :, 1] < 90)
                            & (image[:, :, 0] < 90)) for image in (plain, marked)]
    assert red[0] == 0 and red[1] > 200


@pytest.mark.parametrize("shape, verdict", [
    ("flat", "stuck"), ("falling", None), ("slow", "slow")])
def test_plateaus_of_step_losses(shape, verdict):
    rng = np.random.RandomState(0)
    steps = np.arange(600)
    level = {"flat": np.full(600, 2.0), "falling": 4.0 * np.exp(-steps / 200.0) + 1.0,
             "slow": 2.2 - 0.0004 * steps}[shape]
    plateau = find_plateau(level * (1 + 0.1 * rng.randn(600)), block=32)
    if verdict is None:
        assert plateau.steps < 200  # only the newest blocks agree within the noise
    else:
        assert plateau.steps >= 300 and plateau.verdict == verdict


def test_the_cost_benchmark_runs_both_sides_in_turn(tmp_path, capsys):
    assert main(["benchmark-train", "--network", "ssd_mobilenetv2", "--data-shape", "192",
                 "--batch-size", "1", "--steps", "1", "--rounds", "2", "--warmup-rounds", "1",
                 "--data-threads", "1", "--image-size", "64", "--num-images", "2",
                 "--data-root", str(tmp_path / "shapes"), "--compare", "health"]) == 0
    out = capsys.readouterr().out
    rounds = {side: [float(x) for x in found.split(", ")] for side, found in re.findall(
        r"^health checks (off|on) +median round [\d.]+ s \(rounds ([\d., ]+)\)$", out, re.M)}
    assert sorted(rounds) == ["off", "on"] and all(len(r) == 2 for r in rounds.values())
    found = re.search(r"^on / off: ([\d.]+)x the median round, ([\d.]+)x the timed rounds "
                      r"together; the checks' own time ([\d.]+) ms/step, ([\d.]+)% of the step; "
                      r"first round \(the initial-loss check's extra forward pass\): ([\d.]+) ms",
                      out, re.M)
    assert found, out
    ratio, total, per_step, share, first = map(float, found.groups())
    on, off = np.median(rounds["on"]), np.median(rounds["off"])
    # The rounds are printed to 1 ms, the ratio from the unrounded ones, to 0.001.
    assert ratio == pytest.approx(on / off, abs=0.0006 + on / off * 0.0005 * (1 / on + 1 / off))
    assert total == pytest.approx(sum(rounds["on"]) / sum(rounds["off"]), rel=0.01)
    assert per_step > 0 and share > 0 and first > per_step
