"""A user's own COCO dataset through `zoo eval`: its file and folder named by flags, its own
(non-contiguous) category ids and (large, scattered) image ids kept in the written results,
which pycocotools scores on the very annotation file as `zoo eval` printed."""
import json
import os
import re

import numpy as np
import pytest
from PIL import Image
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

import zoo
from zoo.cli import main as zoo_main
from zoo.errors import OptionsError

from factories import spread_ssd_artifact

CATEGORIES = [(17, "mango"), (1, "zebra"), (5, "apple")]  # listed out of order on purpose
CLASS_NAMES = ["zebra", "apple", "mango"]                 # by category id: 1, 5, 17
IMAGES = [(987654321, "a.jpg", 97, 130), (52, "sub/b.jpg", 160, 75),
          (1000003, "c.jpg", 121, 88), (7, "d.jpg", 64, 150)]


@pytest.fixture(scope="module")
def detector_prefix(tmp_path_factory):
    """An SSD artifact of the dataset's three classes whose scores spread, so that they
    differ."""
    return spread_ssd_artifact(str(tmp_path_factory.mktemp("coco_ids") / "ssd"), CLASS_NAMES,
                               seed=3)


def write_photos(folder):
    """Real JPEGs of odd sizes with some texture, in a folder and a subfolder."""
    rng = np.random.default_rng(0)
    for _, name, width, height in IMAGES:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pixels = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path, quality=90)


def annotations_from(detector, folder):
    """Ground truth made of some of the detector's own boxes (its two best per image, under
    the category its class names) and one box it cannot have found, so AP lies between 0
    and 1 and only the right category ids score it."""
    category_of = {name: category for category, name in CATEGORIES}
    found = detector([os.path.join(folder, name) for _, name, _, _ in IMAGES],
                     score_threshold=0.0, max_detections=2)
    annotations = []
    for (image_id, _, width, height), detections in zip(IMAGES, found):
        for (x1, y1, x2, y2), name in zip(detections.boxes.tolist(), detections.names):
            annotations.append({"image_id": image_id, "category_id": category_of[name],
                                "bbox": [x1, y1, x2 - x1, y2 - y1],
                                "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
    annotations.append({"image_id": 52, "category_id": 17, "bbox": [1, 1, 5, 5], "area": 25,
                        "iscrowd": 0})
    return [dict(ann, id=100 + index) for index, ann in enumerate(annotations)]


@pytest.fixture(scope="module")
def own_coco(detector_prefix, tmp_path_factory):
    """``(annotation file, image folder)`` of a COCO dataset laid out as a user's own."""
    root = tmp_path_factory.mktemp("own_coco")
    images = root / "photos"
    write_photos(str(images))
    data = {"images": [{"id": i, "file_name": n, "width": w, "height": h}
                       for i, n, w, h in IMAGES],
            "categories": [{"id": i, "name": n} for i, n in CATEGORIES],
            "annotations": annotations_from(zoo.load_detector(detector_prefix), str(images))}
    path = root / "labels" / "mine.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    return str(path), str(images)


def pycocotools_ap(annotation_file, results_file, category=None):
    """COCO AP of a results file on an annotation file (of one category, if given), by
    pycocotools alone."""
    ground_truth = COCO(annotation_file)
    evaluator = COCOeval(ground_truth, ground_truth.loadRes(results_file), "bbox")
    if category is not None:
        evaluator.params.catIds = [category]
    evaluator.evaluate()
    evaluator.accumulate()
    evaluator.summarize()
    return evaluator.stats[0]


def test_eval_writes_the_datasets_own_ids_and_pycocotools_agrees(
        detector_prefix, own_coco, tmp_path, capsys):
    annotation_file, image_dir = own_coco
    output = tmp_path / "eval.json"
    assert zoo_main(["eval", "--checkpoint", detector_prefix, "--dataset", "coco",
                     "--data-root", str(tmp_path), "--annotations", annotation_file,
                     "--image-dir", image_dir, "--output", str(output), "--no-progress",
                     "--batch-size", "3"]) == 0
    printed = capsys.readouterr().out
    ap = float(re.search(r"COCO AP (\S+)", printed).group(1))
    results_file = str(tmp_path / "eval-detections.json")
    written = json.loads(open(results_file).read())
    assert {d["image_id"] for d in written} == {i for i, _, _, _ in IMAGES}
    assert {d["category_id"] for d in written} <= {1, 5, 17}
    assert {d["file_name"] for d in written} == {os.path.join(image_dir, n)
                                                for _, n, _, _ in IMAGES}
    saved = json.loads(output.read_text())
    assert 0.2 < saved["coco"]["AP"] < 1.0  # the right ids find the boxes, not all of them
    assert pycocotools_ap(annotation_file, results_file) == pytest.approx(saved["coco"]["AP"],
                                                                          abs=1e-12)
    assert ap == pytest.approx(saved["coco"]["AP"], abs=5e-5)
    assert printed.startswith("%d images of %s, epoch 0" % (len(IMAGES), annotation_file))
    # Per-class COCO AP beside the VOC metrics, one row per class in category-id order.
    table = printed[printed.index("class"):].splitlines()
    assert table[0].split() == ["class", "voc07", "voc_area", "coco"]
    assert [row.split()[0] for row in table[1:4]] == CLASS_NAMES
    assert set(saved["coco_classes"]) == set(CLASS_NAMES) | {"mAP"}
    assert saved["coco_classes"]["mAP"] == saved["coco"]["AP"]
    for category, name in CATEGORIES:
        assert saved["coco_classes"][name] == pytest.approx(
            pycocotools_ap(annotation_file, results_file, category), abs=1e-12), name
    assert len({saved["coco_classes"][name] for name in CLASS_NAMES}) > 1


def test_default_layout_and_a_missing_image_folder(detector_prefix, own_coco, tmp_path,
                                                     capsys):
    annotation_file, image_dir = own_coco
    os.makedirs(tmp_path / "annotations")
    os.symlink(annotation_file, tmp_path / "annotations" / "instances_val.json")
    os.symlink(image_dir, tmp_path / "val")
    common = ["eval", "--checkpoint", detector_prefix, "--dataset", "coco", "--no-progress",
              "--data-root", str(tmp_path), "--output", str(tmp_path / "eval.json")]
    assert zoo_main(common) == 0
    capsys.readouterr()
    assert zoo_main(common + ["--image-dir", str(tmp_path / "images")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "images: no such image folder" in err and "instances_val.json" in err


def test_split_template_and_kinds_without_annotations(own_coco, tmp_path, capsys):
    from zoo.data.factory import open_dataset
    annotation_file, image_dir = own_coco
    template = annotation_file.replace("mine", "{split}")
    assert len(open_dataset("coco", "unused", "mine", annotations=template,
                            image_dir=image_dir)) == len(IMAGES)
    with pytest.raises(OptionsError, match="for --dataset coco, not 'voc'"):
        open_dataset("voc", str(tmp_path), "val", annotations=annotation_file)


def test_duplicate_category_names_are_refused_in_one_line(tmp_path, capsys):
    from zoo.data import COCODataset
    path = tmp_path / "dup.json"
    path.write_text(json.dumps({"images": [], "annotations": [], "categories": [
        {"id": 3, "name": "cat"}, {"id": 9, "name": "dog"}, {"id": 12, "name": "cat"}]}))
    with pytest.raises(zoo.DataError) as error:
        COCODataset(str(path), str(tmp_path))
    assert str(error.value) == ("%s: category name 'cat' appears twice (ids 3 and 12): class "
                                "names must be unique" % path)


def test_training_refuses_one_annotation_file_for_both_splits(own_coco, tmp_path, capsys):
    annotation_file, image_dir = own_coco
    assert zoo_main(["train", "--network", "ssd_mobilenetv2_stride8", "--dataset", "coco",
                     "--annotations", annotation_file, "--image-dir", image_dir,
                     "--output-dir", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("zoo train: error: --annotations %s names one file for both --train-split "
                   "train and --val-split val: put {split} in it, or pass --val-split ''"
                   % annotation_file)


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_export_calibrates_openvino_int8_on_the_users_own_coco_file(detector_prefix, own_coco,
                                                                    tmp_path, capsys):
    annotation_file, image_dir = own_coco
    output = str(tmp_path / "deploy" / "ssd")
    # A COCO split named by its file and folder needs no --data-root.
    assert zoo_main(["export", "--checkpoint", detector_prefix, "--format", "openvino",
                     "--int8", "--dataset", "coco",
                     "--annotations", annotation_file, "--image-dir", image_dir,
                     "--split", "train", "--calib-images", "3", "--no-progress",
                     "--output", output]) == 0
    assert "calibrated on 3 images of coco:%s" % annotation_file in capsys.readouterr().out
    detector = zoo.load_openvino_detector(output + ".xml")
    assert detector.precision["calibration"]["data"] == "coco:" + annotation_file
    assert detector.class_names == CLASS_NAMES
    found = detector([os.path.join(image_dir, name) for _, name, _, _ in IMAGES[:2]],
                     score_threshold=0.0)
    assert [len(f) > 0 for f in found] == [True, True]
