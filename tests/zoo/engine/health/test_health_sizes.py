"""The census of the boxes against the anchors (issue 48): `zoo check-data` and the first
lines of `zoo train` say how large the training boxes are at the network's input, against
its smallest anchor and that map's stride, and when most are smaller, which flags help.
Small birds in large photos, a COCO file of the test's own (its own path, category id 16),
bring the warning; make demo's embedded data, at its recipe and at the README's tools
walkthrough, leaves it silent."""
import json
import logging
import math
import os
import re
import warnings

import cv2
import numpy as np
import pytest

from zoo.cli import main
from zoo.data import embedded
from zoo.errors import HealthWarning

NETWORK = "ssd_mobilenetv2_stride8"   # make demo's, the small-object recipe's
PHOTO = (1600, 1200)                  # (width, height) of the test's photos
INPUT = 192                           # the network's default data shape
SMALLEST_ANCHOR = 0.1                 # its config's smallest anchor, a fraction of the side
IOU = 0.5                             # its config's overlap_threshold


def write_birds(folder, photos=6, seed=0):
    """A COCO file ``folder/labels/birds.json`` (its own path, not the zoo's layout) of
    ``photos`` JPEGs of 1600x1200 in ``folder/photos``, each with 1-4 birds (dark ellipses on
    a noisy background) 1-5% of the long side, one class ``bird`` of COCO id 16; returns the
    ``zoo`` flags that read it and its boxes as ``(N, 4)`` COCO ``[x, y, w, h]``."""
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(folder, "photos"), exist_ok=True)
    os.makedirs(os.path.join(folder, "labels"), exist_ok=True)
    images, annotations = [], []
    for index in range(photos):
        image = rng.randint(90, 160, (PHOTO[1], PHOTO[0], 3), dtype=np.uint8)
        for _ in range(rng.randint(1, 5)):
            w = int(rng.uniform(0.01, 0.05) * PHOTO[0])
            h = max(4, int(w * rng.uniform(0.6, 1.0)))
            x, y = int(rng.randint(0, PHOTO[0] - w)), int(rng.randint(0, PHOTO[1] - h))
            cv2.ellipse(image, (x + w // 2, y + h // 2), (w // 2, h // 2), 0, 0, 360,
                        (20, 30, 40), -1)
            annotations.append({"id": len(annotations) + 1, "image_id": 500 + index,
                                "category_id": 16, "bbox": [x, y, w, h], "area": w * h,
                                "iscrowd": 0})
        name = "IMG_%04d.jpg" % index
        cv2.imwrite(os.path.join(folder, "photos", name), image)
        images.append({"id": 500 + index, "file_name": name, "width": PHOTO[0],
                       "height": PHOTO[1]})
    path = os.path.join(folder, "labels", "birds.json")
    with open(path, "w") as stream:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": 16, "name": "bird"}]}, stream)
    flags = ["--dataset", "coco", "--annotations", path, "--image-dir",
             os.path.join(folder, "photos"), "--val-split", ""]
    return flags, np.array([a["bbox"] for a in annotations], np.float64)


def input_sides(boxes, side=INPUT):
    """Each box's side (the root of its area) once its photo is stretched to ``side``."""
    return np.sqrt(boxes[:, 2] * side / PHOTO[0] * boxes[:, 3] * side / PHOTO[1])


def px(value):
    """Pixels as the census writes them: a decimal under 10, none for a whole number."""
    return ("%.1f" % value if value < 10 else "%.0f" % value).replace(".0", "")


def health_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, HealthWarning)]


def check_data(capsys, tmp_path, data, *flags):
    """``zoo check-data`` of ``data`` with ``flags``: (stdout lines, health warnings)."""
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["check-data", "--network", NETWORK, "--output-dir",
                     str(tmp_path / "check"), "--batches", "1", "--data-threads", "1",
                     *data, *flags]) == 0
    return capsys.readouterr().out.splitlines(), health_warnings(caught)


def flag_value(message, flag):
    match = re.search(r"%s (\d+(?:\.\d+)?)" % flag, message)
    assert match, "%s not in %s" % (flag, message)
    return float(match.group(1))


def test_small_birds_in_large_photos_are_told_the_flags_that_help(tmp_path, capsys, caplog):
    data, boxes = write_birds(str(tmp_path / "birds"))
    out, found = check_data(capsys, tmp_path, data, "--batch-size", "2")
    sides = input_sides(boxes)
    anchor = SMALLEST_ANCHOR * INPUT
    # the line: the boxes at the input, measured here from the COCO file
    line = next(line for line in out if "boxes at the" in line)
    assert line == (
        "census: train coco:%s: boxes at the 192x192 input: median side %s px, 10th "
        "percentile %s px; smallest anchor 19 px on the stride-8 map; anchors can match 0%% "
        "of them at IoU 0.5 (best possible recall)" % (
            data[3], px(np.median(sides)), px(np.percentile(sides, 10))))
    assert np.median(sides) < anchor * math.sqrt(IOU)   # no anchor matches the median box
    assert len(found) == 1, found
    message = found[0]
    assert message.startswith("census: coco:%s: 100%% of its training boxes are smaller than "
                              "the smallest anchor (19 px" % data[3]), message

    # --tiles: tiles of the photos' own pixels that bring the median box, resized to the
    # input, to an anchor's size; fewer pixels than the photos' short side
    tile = flag_value(message, "--tiles")
    photo_median = np.median(np.sqrt(boxes[:, 2] * boxes[:, 3]))
    assert tile % 32 == 0 and tile < PHOTO[1]
    assert photo_median * INPUT / tile >= anchor * math.sqrt(IOU)
    # --data-shape N with the anchors fitted: the median box at N reaches the smallest anchor
    shape = flag_value(message, "--data-shape")
    assert "--data-shape %d --fit-anchors" % shape in message
    assert shape % 32 == 0 and INPUT < shape <= 1024
    assert np.median(sides) * shape / INPUT >= anchor
    # --fit-anchors alone gives some of them an anchor (measured in tests/zoo/schema/
    # test_anchors.py); the zoom-out would shrink them further: --max-expand 1
    assert re.search(r"--fit-anchors \(best possible recall then [1-9]\d*%\)", message), message
    assert message.endswith("and zoom out less, --max-expand 1 (4 shrinks boxes up to 4x more)")

    # `zoo train`'s first lines say the same, before the first step
    caplog.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        assert main(["train", "--network", NETWORK, "--epochs", "1", "--batch-size", "2",
                     "--data-threads", "1", "--output-dir", str(tmp_path / "run"),
                     *data]) == 0
    # (the initial-loss check follows, on the first step: the box targets are far off)
    assert health_warnings(caught)[0] == message
    lines = [record.getMessage() for record in caplog.records]
    assert lines.index(line) < next(i for i, text in enumerate(lines)
                                    if text.startswith("epoch 1:"))


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory):
    """make demo's embedded data (its seed, image size and preset), 200 of its 1500
    training images."""
    return embedded.generate(str(tmp_path_factory.mktemp("shapes")), seed=0, num_train=200,
                             num_val=8, image_size=256)


@pytest.mark.parametrize("flags", [
    # make demo's recipe (zoo.jobs.recipes.SSD)
    ["--data-shape", "192", "--max-expand", "1", "--no-crop"],
    # the README's tools walkthrough (its batch 16 cut to the test's data), zoom-out at 4
    ["--data-shape", "256"],
    # the defaults
    []], ids=["demo", "readme", "defaults"])
def test_make_demos_data_is_silent(flags, demo_data, tmp_path, capsys):
    out, found = check_data(capsys, tmp_path, ["--dataset", "voc", "--data-root", demo_data],
                            "--batch-size", "4", *flags)
    assert found == []
    line = next(line for line in out if "boxes at the" in line)
    assert line.endswith("anchors can match 100% of them at IoU 0.5 (best possible recall)")


def test_the_census_of_a_run_on_tiles_measures_the_tiles(tmp_path, caplog):
    """With --tiles, the boxes the census (and --fit-anchors) measures are those of the
    windows the run trains on: the whole photos and their tiles, the tiles' boxes larger at
    the input."""
    data, boxes = write_birds(str(tmp_path / "birds"))
    with warnings.catch_warnings(record=True), caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        assert main(["train", "--network", NETWORK, "--epochs", "1", "--batch-size", "4",
                     "--data-threads", "1", "--output-dir", str(tmp_path / "run"),
                     "--tiles", "448", "--max-expand", "1", *data]) == 0
    line = next(record.getMessage() for record in caplog.records
                if "boxes at the" in record.getMessage())
    median = float(re.search(r"median side ([\d.]+) px", line).group(1))
    assert median > np.median(input_sides(boxes)) + 1, line
