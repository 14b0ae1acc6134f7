"""Training health, the model's side (zoo.engine.health.batchnorm, .overfit, .reference):
each failure injected through ``zoo train`` on COCO files and PNG images the test writes
(its own category and image ids, 90 x 70 pictures), and the healthy runs silent.

Most runs train a two-map SSD at 64 pixels (a YAML config on ssd_mobilenetv2_stride8, the
user's own route), a few milliseconds a step, to tell a square from a bar."""
import csv
import hashlib
import json
import logging
import os
import shutil
import warnings

import mxnet as mx
import numpy as np
import pytest
from PIL import Image

import symbols.layers
import symbols.ssd
from zoo.cli import main
from zoo.engine.health import batchnorm
from zoo.engine.health.reference import swapped_classes
from zoo.errors import HealthWarning

from factories import tiny_ssd_yaml

SQUARE, BAR = 44, 9
"""The COCO category ids of the two classes (the zoo orders classes by id: bar, square)."""


def write_coco(root, split, count, seed, swapped=False):
    """``root/split.json`` and its PNG images: on each dark, noisy 90 x 70 picture a bright
    square or a wide bar; ``swapped``: each annotated with the other's category."""
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    images, annotations = [], []
    for index in range(count):
        picture = rng.randint(0, 60, (70, 90, 3)).astype(np.uint8)
        bar = index % 2
        w, h = (44, 14) if bar else (30, 30)
        x, y = rng.randint(2, 90 - w - 2), rng.randint(2, 70 - h - 2)
        picture[y:y + h, x:x + w] = (220, 50, 190) if bar else (220, 200, 40)
        name = "%s_%03d.png" % (split, index)
        Image.fromarray(picture).save(os.path.join(root, "images", name))
        image_id = 7001 + 13 * index
        images.append({"id": image_id, "file_name": name, "width": 90, "height": 70})
        category = (SQUARE if bar else BAR) if swapped else (BAR if bar else SQUARE)
        annotations.append({"id": 500 + index, "image_id": image_id, "category_id": category,
                            "bbox": [int(x), int(y), w, h], "area": w * h, "iscrowd": 0})
    with open(os.path.join(root, split + ".json"), "w") as stream:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": SQUARE, "name": "square"},
                                  {"id": BAR, "name": "bar"}]}, stream)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The dataset: ``swapped`` (64 images, categories exchanged), ``train`` (16) and ``val``
    (20), and the tiny model's YAML config."""
    root = str(tmp_path_factory.mktemp("squares"))
    write_coco(root, "swapped", 64, seed=1, swapped=True)
    write_coco(root, "train", 16, seed=2)
    write_coco(root, "val", 20, seed=3)
    with open(os.path.join(root, "tiny.yaml"), "w") as stream:
        stream.write(tiny_ssd_yaml())
    return root


def train(data, output, *flags, network=True):
    """``zoo train`` of the tiny model on ``data``; returns its exit status and the health
    warnings it issued."""
    argv = ["train", "--dataset", "coco", "--data-root", data, "--annotations",
            os.path.join(data, "{split}.json"), "--image-dir", os.path.join(data, "images"),
            "--data-shape", "64", "--batch-size", "4", "--max-expand", "1", "--no-crop",
            "--output-dir", str(output), "--no-progress", "--data-threads", "1"]
    argv += ["--network", os.path.join(data, "tiny.yaml")] if network else []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status = main(argv + list(flags))
    return status, [str(w.message) for w in caught if issubclass(w.category, HealthWarning)]


def health(prefix):
    with open(prefix + "-health.json") as stream:
        return json.load(stream)


def write_log(path, rows):
    with open(path, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def source(data, tmp_path_factory):
    """A run from the initialiser trained 128 steps on the swapped annotations and validated
    on the right ones, against a published log far ahead of it: ``(its prefix, its health
    warnings, the published log)``."""
    output = tmp_path_factory.mktemp("source")
    published = write_log(str(output / "published.csv"), [
        {"epoch": epoch, "lr": 0.02, "samples_per_sec": 100, "cls_loss": 0.2,
         "box_loss": 0.3, "val_map": 0.95 if epoch == 4 else ""} for epoch in range(1, 5)])
    # 0.2.0's lr 0.02 and wd 5e-4 under the loss then (4x smaller gradients): the same updates
    status, caught = train(data, output, "--train-split", "swapped", "--epochs", "4",
                           "--val-interval", "4", "--lr", "0.005", "--wd", "0.002",
                           "--batch-size", "2", "--reference", published)
    assert status == 0
    return str(output / "tiny"), caught, published


def params_of(prefix, epoch):
    return {name: array.asnumpy() for name, array in
            mx.nd.load("%s-%04d.params" % (prefix, epoch)).items()}


def test_swapped_annotations_show_in_the_confusion_matrix_and_warn(source):
    prefix, caught, _ = source
    (message,) = [m for m in caught if m.startswith("confusion:")]
    assert message.startswith("confusion: epoch 4: validation objects are mostly detected as "
                              "another class: ")
    assert "bar as square (" in message and "square as bar (" in message
    assert message.endswith("(see %s-confusion.csv)" % prefix)
    with open(prefix + "-confusion.csv", newline="") as stream:
        rows = {row[0]: row[1:] for row in csv.reader(stream)}
    assert rows["true \\ detected"] == ["bar", "square", "missed"]
    counts = np.array([[int(n) for n in rows[name]] for name in ("bar", "square", "no object")])
    assert counts[0, 1] > counts[0, 0] and counts[1, 0] > counts[1, 1]  # off the diagonal
    assert counts[:2].sum() == 20                                        # every object
    assert os.path.getsize(prefix + "-confusion.png") > 0
    assert prefix + "-confusion.png" in health(prefix)["pictures"]
    # The batch norms of this healthy run, checked after its 128 updates, raised nothing.
    assert health(prefix)["checks"]["batchnorm"]["status"] == "ok"


def test_swaps_are_told_from_a_model_that_calls_everything_one_class():
    collapsed = np.array([[9, 0, 0, 1], [8, 1, 0, 0], [7, 0, 2, 1], [3, 0, 0, 0]])
    assert swapped_classes(collapsed) == []
    swapped = np.array([[1, 8, 0, 1], [9, 1, 0, 0], [0, 0, 9, 1], [3, 0, 0, 0]])
    assert swapped_classes(swapped) == [(0, 1, 8, 9), (1, 0, 9, 10)]
    assert swapped_classes(swapped, min_matched=10) == []  # class 0: too few to judge


def reset_statistics(prefix, epoch, folder):
    """A copy of the artifact at ``prefix`` in ``folder`` whose batch norms' running
    statistics are back at their initial values (the checksum redone, as a careless
    conversion would)."""
    shutil.copytree(os.path.dirname(prefix), folder)
    copy = os.path.join(folder, os.path.basename(prefix))
    params = mx.nd.load("%s-%04d.params" % (copy, epoch))
    for name, array in params.items():
        if name.endswith("_moving_mean") or name.endswith("_moving_var"):
            array[:] = name.endswith("_moving_var")
    mx.nd.save("%s-%04d.params" % (copy, epoch), params)
    meta_path = "%s-%04d.json" % (copy, epoch)
    with open(meta_path) as stream:
        meta = json.load(stream)
    with open("%s-%04d.params" % (copy, epoch), "rb") as stream:
        meta["params_sha256"] = hashlib.sha256(stream.read()).hexdigest()
    with open(meta_path, "w") as stream:
        json.dump(meta, stream)
    return copy


def test_healthy_checks_and_a_twin_reference_are_silent_and_change_no_parameter(
        data, source, tmp_path, monkeypatch):
    """A fine-tune whose source statistics fit, checked against its twin run without the
    checks: no warning, and the same checkpoint after an epoch trained after the checks
    (the batch norm check made to run from the first update on)."""
    prefix, _, _ = source
    monkeypatch.setattr(batchnorm, "MIN_STEPS", 1)
    fine_tune = ["--init-from", prefix, "--epochs", "2", "--val-split", "", "--lr", "0.001"]
    assert train(data, tmp_path / "off", *fine_tune, "--no-health", network=False) == (0, [])
    twin = str(tmp_path / "off" / "tiny-log.csv")
    assert train(data, tmp_path / "on", *fine_tune, "--reference", twin, network=False) == (0, [])
    checks = health(str(tmp_path / "on" / "tiny"))["checks"]
    assert checks["batchnorm"]["status"] == checks["reference"]["status"] == "ok"
    off = params_of(str(tmp_path / "off" / "tiny"), 2)
    on = params_of(str(tmp_path / "on" / "tiny"), 2)
    assert set(off) == set(on)
    for name in off:
        np.testing.assert_array_equal(on[name], off[name], err_msg=name)


def test_running_statistics_left_at_their_initial_values_warn_naming_the_layer(
        data, source, tmp_path, monkeypatch):
    """A source artifact whose statistics were reset, fine-tuned by batch norms whose
    momentum 1 never updates them (a port's mistake): left at their initial values."""
    prefix, _, _ = source
    reset = reset_statistics(prefix, 4, str(tmp_path / "source"))
    monkeypatch.setattr(symbols.layers, "BN_MOMENTUM", 1.0)
    status, caught = train(data, tmp_path / "reset", "--init-from", reset, "--epochs", "4",
                           "--val-interval", "4", "--val-split", "", "--lr", "0.00025",
                           "--train-split", "swapped", "--batch-size", "2", network=False)
    assert status == 0
    (message,) = caught
    assert message.startswith("batchnorm: the same training batch scores ")
    assert "worse in eval mode (running statistics) than in train mode (batch statistics)" \
        in message
    with open(str(tmp_path / "reset" / "tiny-batchnorm.csv"), newline="") as stream:
        rows = list(csv.DictReader(stream))
    worst = max(rows, key=lambda row: float(row["factor"]))
    assert "worst layer %s, whose running statistics are %.2fx off" % (
        worst["layer"], float(worst["factor"])) in message
    assert float(worst["factor"]) >= 5


@pytest.mark.parametrize("budget, epochs", [(1e9, [1, 2, 3]), (0.0, [3])])
def test_the_batchnorm_check_keeps_within_its_share_of_the_run_and_always_checks_the_last(
        data, source, tmp_path, monkeypatch, budget, epochs):
    """Within its budget it runs at each validation; past it, it skips them, but not the last
    epoch's, whose statistics the artifact keeps."""
    prefix, _, _ = source
    monkeypatch.setattr(batchnorm, "MIN_STEPS", 1)
    monkeypatch.setattr(batchnorm, "BUDGET", budget)
    status, caught = train(data, tmp_path, "--init-from", prefix, "--epochs", "3",
                           "--val-split", "", "--lr", "0.001", network=False)
    assert (status, caught) == (0, [])
    with open(str(tmp_path / "tiny-batchnorm.csv"), newline="") as stream:
        assert sorted({int(row["epoch"]) for row in csv.DictReader(stream)}) == epochs


def test_freeze_bn_keeps_statistics_scale_and_shift_and_freeze_alone_says_so(
        data, source, tmp_path, caplog):
    prefix, _, _ = source
    caplog.set_level(logging.INFO, logger="zoo.train")
    status, caught = train(data, tmp_path, "--init-from", prefix, "--epochs", "1",
                           "--val-split", "", "--freeze", "_bn_(gamma|beta)$",
                           "--freeze-bn", "^block1_", network=False)
    assert status == 0 and caught == []
    before, after = params_of(prefix, 4), params_of(str(tmp_path / "tiny"), 1)
    statistics = [name for name in before if name.endswith(("_moving_mean", "_moving_var"))]
    frozen = [name for name in statistics if name.startswith("aux:block1_")]
    assert frozen and len(frozen) < len(statistics)
    for name in before:
        if name.endswith(("_bn_gamma", "_bn_beta")) or name in frozen:
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert all(not np.array_equal(after[name], before[name])
               for name in set(statistics) - set(frozen))
    (note,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("note:")]
    moving = (len(statistics) - len(frozen)) // 2
    assert note.startswith("note: --freeze fixes the scale and shift of %d BatchNorm layers "
                           "(conv1_bn, ...) but not their running statistics" % moving)
    assert "--freeze-bn" in note


def test_freeze_bn_naming_no_layer_is_refused(data, tmp_path, capsys):
    status, _ = train(data, tmp_path, "--epochs", "1", "--freeze-bn", "^resnet_")
    assert status == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "zoo train: error: freeze_bn '^resnet_' matches no BatchNorm layer of tiny (whose "
        "names are like conv1_bn, block1_dwise_bn, block1_project_bn)")


def test_overfit_batch_passes_on_a_healthy_model(data, tmp_path, capsys):
    status, _ = train(data, tmp_path, "--overfit-batch", "30", "--optimizer", "adam", "--lr",
                      "0.003", "--batch-size", "2")
    assert status == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("overfit-batch passed: the loss went from ")
    assert line.endswith(" on one batch of 2 images")
    assert not os.path.exists(str(tmp_path / "tiny-0001.params"))


def test_overfit_batch_fails_in_one_line_when_the_box_loss_misses_the_boxes(
        data, tmp_path, capsys, monkeypatch):
    predictions = symbols.ssd.predictions

    def detached(*args, **kwargs):  # the injected bug: no gradient reaches the box outputs
        classes, boxes, anchors = predictions(*args, **kwargs)
        return classes, mx.sym.BlockGrad(boxes, name="boxes_detached"), anchors
    monkeypatch.setattr(symbols.ssd, "predictions", detached)
    status, _ = train(data, tmp_path, "--overfit-batch", "30", "--optimizer", "adam", "--lr",
                      "0.003", "--batch-size", "2")
    assert status == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("zoo train: error: --overfit-batch: the loss went from ")
    start, end = (float(word) for word in line.split("the loss went from ")[1]
                  .split(" (")[0].split(" to "))
    assert end > 0.1 * start
    assert "in 30 steps on one batch of 2 images, not below 10% of its start" in line


def test_reference_warns_once_a_figure_at_the_epoch_this_run_falls_behind(source):
    prefix, caught, published = source
    (loss,) = [m for m in caught if m.startswith("reference: epoch 1: loss ")]
    assert loss.endswith("against the reference's 0.5, above it by more than the band of 25%% "
                         "(%s); compare the two runs' settings and data, and their curves "
                         "(zoo plot-log)" % published)
    (behind,) = [m for m in caught if m.startswith("reference: epoch 4: validation mAP ")]
    assert "against the reference's 0.9500, below it by more than the band" in behind
    assert len([m for m in caught if m.startswith("reference:")]) == 2  # once a figure
    with open(prefix + "-log.csv", newline="") as stream:
        first = next(csv.DictReader(stream))
    assert loss.startswith("reference: epoch 1: loss %.4g " % (
        float(first["cls_loss"]) + float(first["box_loss"])))


def test_reference_logs_that_cannot_be_compared_are_refused_in_one_line(data, tmp_path,
                                                                      capsys):
    other = write_log(str(tmp_path / "other.csv"), [{"epoch": 1, "rpn_cls_loss": 0.3}])
    for flags, message in (
            (["--reference", str(tmp_path / "none")], "--reference %s: no such CSV log; name "
             "a run's <prefix>-log.csv (or its prefix, or its folder)" % (tmp_path / "none")),
            (["--reference", other], "--reference %s: neither this model's losses (cls_loss, "
             "box_loss) nor val_map among its columns (epoch, rpn_cls_loss)" % other),
            (["--reference", other, "--no-health"], "--reference %s compares through the "
             "health checks: drop --no-health" % other)):
        assert train(data, tmp_path / "out", "--epochs", "1", *flags) == (1, [])
        assert capsys.readouterr().err.strip().splitlines()[-1] == "zoo train: error: " + message


def test_a_healthy_run_on_the_embedded_shapes_warns_nothing(shapes, tmp_path):
    """``make demo``'s model and data, briefly."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["train", "--network", "ssd_mobilenetv2_stride8", "--dataset", "voc",
                     "--data-root", shapes, "--data-shape", "192", "--batch-size", "4",
                     "--epochs", "1", "--no-progress", "--data-threads", "1",
                     "--output-dir", str(tmp_path)]) == 0
    assert [w for w in caught if issubclass(w.category, HealthWarning)] == []
    prefix = str(tmp_path / "ssd_mobilenetv2_stride8")
    checks = health(prefix)["checks"]
    assert checks["confusion"]["status"] == "ok" and os.path.exists(prefix + "-confusion.csv")
    # Two updates: the batch norms' statistics cannot be judged yet.
    assert checks["batchnorm"] == {"status": "not run",
                                   "detail": "from update 100 on, this run has made 2"}
