"""Training health, the data (issue 31): the census before training, the first batch's
picture and checks, and `zoo check-data`, each failure injected as a user's data brings it
through `zoo train` or `zoo check-data`: VOC folders and COCO files this test writes (its
own category and image ids, odd sizes, a PNG among the JPEGs). A healthy run on the
embedded shapes data warns nothing."""
import json
import logging
import os
import warnings

import cv2
import numpy as np
import pytest

import zoo
from zoo.cli import main
from zoo.data import DetectionLoader, ValTransform, VOCDataset, train_transform
from zoo.errors import DataError, HealthWarning

NETWORK = "ssd_mobilenetv2_stride8"
CLASSES = ("cup", "kettle", "spoon")
CATEGORY_IDS = (44, 2, 9)          # COCO ids of CLASSES, neither contiguous nor sorted
SIZES = [(120, 96), (100, 130), (128, 128), (96, 112), (130, 100), (112, 96), (128, 104),
         (104, 120)]
"""(width, height) of the test's 8 pictures."""
FAST = ["--data-shape", "128", "--batch-size", "4", "--data-threads", "1"]


def scene(index, classes=CLASSES):
    """Picture ``index``: noise with 2 filled rectangles; ``(image, [(class, (x1, y1, x2,
    y2))])``, corners in pixels (continuous)."""
    rng = np.random.RandomState(index)
    width, height = SIZES[index % len(SIZES)]
    image = rng.randint(0, 80, (height, width, 3), dtype=np.uint8)
    objects = []
    for number in range(2):
        w, h = (int(side) for side in rng.randint(24, 48, size=2))
        x, y = int(rng.randint(0, width - w)), int(rng.randint(0, height - h))
        name = classes[(index + number) % len(classes)]
        image[y:y + h, x:x + w] = (60 + 60 * number, 200, 80 * (index % 3))
        objects.append((name, (x, y, x + w, y + h)))
    return image, objects


def write_image(path, image, png=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ok, data = cv2.imencode(".png" if png else ".jpg", image[:, :, ::-1])
    with open(path, "wb") as stream:
        stream.write(data.tobytes())


def write_voc(root, train, val=(), box=None, classes=lambda index: CLASSES,
              skip=lambda index: False):
    """A VOC folder of scenes ``train`` and ``val`` (indices, an index may repeat), scene
    ``index``'s objects of ``classes(index)``, its boxes written as ``box(corners, width,
    height)`` gives them (1-based VOC numbers), none where ``skip(index)``; picture 3 is a
    PNG."""
    box = box or (lambda corners, width, height: [c + 1 for c in corners])
    for index in sorted(set(train) | set(val)):
        image, objects = scene(index, classes(index))
        height, width = image.shape[:2]
        image_id = "%06d" % index
        write_image(os.path.join(root, "JPEGImages", image_id + ".jpg"), image, png=index == 3)
        parts = ["<annotation><size><width>%d</width><height>%d</height><depth>3</depth>"
                 "</size>" % (width, height)]
        for name, corners in [] if skip(index) else objects:
            values = box(corners, width, height)
            parts.append("<object><name>%s</name><bndbox>%s</bndbox></object>" % (name, "".join(
                "<%s>%g</%s>" % (tag, value, tag)
                for tag, value in zip(("xmin", "ymin", "xmax", "ymax"), values))))
        os.makedirs(os.path.join(root, "Annotations"), exist_ok=True)
        with open(os.path.join(root, "Annotations", image_id + ".xml"), "w") as stream:
            stream.write("".join(parts) + "</annotation>\n")
    os.makedirs(os.path.join(root, "ImageSets", "Main"), exist_ok=True)
    for split, indices in (("train", train), ("val", val)):
        with open(os.path.join(root, "ImageSets", "Main", split + ".txt"), "w") as stream:
            stream.write("".join("%06d\n" % index for index in indices))
    with open(os.path.join(root, "classes.txt"), "w") as stream:
        stream.write("\n".join(CLASSES) + "\n")
    return str(root)


def write_coco(folder, pictures, bbox=None):
    """A COCO file ``folder/train.json`` with its images in ``folder/images``: ``pictures``
    maps the file's own image ids to scene indices (several ids may share one file); boxes
    as ``bbox(x, y, w, h, width, height)`` gives them."""
    bbox = bbox or (lambda x, y, w, h, width, height: [x, y, w, h])
    images, annotations = [], []
    for image_id, index in pictures.items():
        image, objects = scene(index)
        height, width = image.shape[:2]
        name = "scene%d.jpg" % index
        write_image(os.path.join(folder, "images", name), image)
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})
        for name, (x1, y1, x2, y2) in objects:
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": CATEGORY_IDS[CLASSES.index(name)],
                                "bbox": bbox(x1, y1, x2 - x1, y2 - y1, width, height),
                                "iscrowd": 0})
    path = os.path.join(folder, "train.json")
    with open(path, "w") as stream:
        json.dump({"images": images, "annotations": annotations, "categories": [
            {"id": cid, "name": name} for cid, name in zip(CATEGORY_IDS, CLASSES)]}, stream)
    return ["--dataset", "coco", "--annotations", path, "--image-dir",
            os.path.join(folder, "images"), "--val-split", ""]


def voc_flags(root, val=True):
    return ["--dataset", "voc", "--data-root", root] + ([] if val else ["--val-split", ""])


def train_argv(output, data):
    return ["train", "--network", NETWORK, "--epochs", "1", "--output-dir", str(output),
            "--no-progress", *FAST, *data]


def check_argv(output, data):
    return ["check-data", "--network", NETWORK, "--output-dir", str(output), "--batches", "1",
            *FAST, *data]


def health_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, HealthWarning)]


def picture(path):
    return cv2.imread(str(path))[:, :, ::-1]


# ---- healthy: the embedded shapes data, as `make demo` trains it ---------------------------

def test_a_healthy_run_draws_its_first_batch_names_it_and_warns_nothing(shapes, tmp_path,
                                                                       caplog, capsys):
    output = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        assert main(train_argv(output, voc_flags(shapes))) == 0
    assert health_warnings(caught) == []
    lines = [record.getMessage() for record in caplog.records]
    header = next(i for i, line in enumerate(lines) if line.startswith("training %s" % NETWORK))
    path = str(output / "train_batch0.png")
    assert lines[header + 1] == "first batch, as the network gets it: %s" % path
    census_lines = [line for line in lines if line.startswith("census: ")]
    assert census_lines[:2] == [
        "census: train voc:%s/train: 8 images (8 files), 19 boxes (2.4 per image, at most 4; "
        "0 images without), none lost before the network; classes: circle 1, square 6, "
        "triangle 3, star 9" % shapes,
        "census: val voc:%s/val: 4 images (4 files), 10 boxes (2.5 per image, at most 4; "
        "0 images without), none lost before the network; classes: circle 6, square 2, "
        "triangle 1, star 1" % shapes]
    # the boxes against the anchors (tests/zoo/engine/health/test_health_sizes.py): every
    # shape is larger than the smallest anchor, 0.1 of the side
    assert census_lines[2].startswith("census: train voc:%s/train: boxes at the 128x128 "
                                      "input: median side " % shapes), census_lines[2]
    assert census_lines[2].endswith("; smallest anchor 13 px on the stride-8 map; anchors can "
                                    "match 100% of them at IoU 0.5 (best possible recall)")
    assert len(census_lines) == 3
    health = next(line for line in lines if line.startswith("health: "))
    assert "census ok" in health and "first batch ok" in health and "0 warnings" in health
    assert "pictures: %s" % path in health

    # The picture is the first batch as the network got it, de-normalised: 2 x 2 images of
    # 128 pixels, whose pixels away from the boxes are the batch's own.
    drawn = picture(path)
    assert drawn.shape == (2 * 128 + 2, 2 * 128 + 2, 3)
    model = zoo.get_model(NETWORK, data_shape=128, num_classes=4)
    loader = DetectionLoader(VOCDataset(shapes, "train"), 4,
                             train_transform(model.preprocessing()), seed=0, num_workers=1,
                             max_objects=4)
    batch = next(iter(loader))
    mean, std = (np.array(model.preprocessing()[key])[:, None, None] for key in ("mean", "std"))
    first = np.clip(batch.data[0] * std + mean, 0, 255).transpose(1, 2, 0)
    difference = np.abs(drawn[:128, :128].astype(float) - first)
    assert np.median(difference) <= 1, np.median(difference)

    # `zoo check-data` with the same flags: the same census, the same first batch, silent.
    capsys.readouterr()
    checked = tmp_path / "check"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(check_argv(checked, voc_flags(shapes))) == 0
    assert health_warnings(caught) == []
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == census_lines
    assert out[3] == ("first batch: 4 images, 8 of their 9 annotated boxes in the 128x128 "
                      "input, 20 positive anchors for %s" % NETWORK)
    assert out[4:] == ["picture: %s" % (checked / "train_batch0.png"), "0 warnings"]
    assert np.array_equal(picture(checked / "train_batch0.png"), drawn)


# ---- refused before any model is built ------------------------------------------------------

def normalised_voc(tmp_path):
    root = write_voc(tmp_path / "voc", range(8), box=lambda corners, width, height: [
        value / side for value, side in zip(corners, (width, height) * 2)])
    return voc_flags(root, val=False), (
        "voc:%s/train: 16 of its 16 boxes (100%%) lie within 1.5 pixels of the top-left corner "
        "of images of 32 pixels and more (first: image 000000): the coordinates look normalised "
        "to [0, 1], but the zoo expects pixels; multiply xmin and xmax by the image's width, "
        "ymin and ymax by its height" % root)


def normalised_coco(tmp_path):
    flags = write_coco(str(tmp_path / "coco"), {1000 + 7 * i: i for i in range(8)},
                       bbox=lambda x, y, w, h, width, height: [x / width, y / height,
                                                               w / width, h / height])
    return flags, (
        "coco:%s: 16 of its 16 boxes (100%%) lie within 1.5 pixels of the top-left corner of "
        "images of 32 pixels and more (first: image 1000): the coordinates look normalised to "
        "[0, 1], but the zoo expects pixels; multiply each bbox's x and w by its image's "
        "width, y and h by its height (COCO bbox is [x, y, w, h] in pixels)" % flags[3])


def no_boxes(tmp_path):
    root = write_voc(tmp_path / "voc", range(8), skip=lambda index: True)
    return voc_flags(root, val=False), (
        "voc:%s/train: none of its 8 images has a box: there is nothing to train on; check the "
        "<object> entries of %s" % (root, os.path.join(root, "Annotations")))


def skip_bad_drops_most(tmp_path):
    """5 of 8 annotations name a class the dataset does not have."""
    root = write_voc(tmp_path / "voc", range(8),
                     classes=lambda index: ("cup", "kettle", "teapot"))
    return voc_flags(root, val=False) + ["--skip-bad"], (
        "voc:%s/train: --skip-bad dropped 5 of its 8 images (62%%), more than --max-skipped "
        "0.2 allows (the warning above gives the first reason): fix them, or raise "
        "--max-skipped" % root)


def widths_as_corners(tmp_path):
    """VOC's xmax/ymax written as a width and a height."""
    root = write_voc(tmp_path / "voc", range(8), box=lambda corners, width, height: [
        corners[0] + 1, corners[1] + 1, corners[2] - corners[0], corners[3] - corners[1]])
    return voc_flags(root, val=False), "xmax and ymax look like a width and a height: write " \
                                       "the corners xmax = xmin + width, ymax = ymin + height"


REFUSED = [normalised_voc, normalised_coco, no_boxes, skip_bad_drops_most, widths_as_corners]


@pytest.mark.parametrize("command", ["train", "check-data"])
@pytest.mark.parametrize("make", REFUSED, ids=[make.__name__ for make in REFUSED])
def test_data_no_run_can_learn_from_is_refused_in_one_line(make, command, tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.setattr("zoo.jobs.train.build_model",
                        lambda *args, **kwargs: pytest.fail("a model was built"))
    flags, message = make(tmp_path)
    argv = (train_argv if command == "train" else check_argv)(tmp_path / "out", flags)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # --skip-bad's own warning
        assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zoo %s: error: " % command), err
    assert message in err


# ---- warned: repeated files, a class without training boxes --------------------------------

def test_a_list_of_one_image_repeated_is_named_with_the_file(tmp_path):
    root = write_voc(tmp_path / "voc", [5] * 8, val=range(4))
    with pytest.warns(HealthWarning) as caught:
        assert main(train_argv(tmp_path / "out", voc_flags(root))) == 0
    # The one picture holds no kettle: that class is named too.
    assert health_warnings(caught)[:1] == [
        "census: voc:%s/train lists 8 images but only 1 distinct file (%s 8 times): the run "
        "would learn these pictures by heart; look at %s" % (
            root, os.path.join(root, "JPEGImages", "000005.jpg"),
            os.path.join(root, "ImageSets", "Main", "train.txt"))]


def test_a_coco_file_of_one_image_under_many_ids_is_named(tmp_path, capsys):
    flags = write_coco(str(tmp_path / "coco"), {9000 + i: 2 for i in range(8)})
    with pytest.warns(HealthWarning) as caught:
        assert main(check_argv(tmp_path / "out", flags)) == 0
    assert health_warnings(caught)[:1] == [
        "census: coco:%s lists 8 images but only 1 distinct file (%s 8 times): the run would "
        "learn these pictures by heart; look at %s" % (
            flags[3], os.path.join(flags[5], "scene2.jpg"), flags[3])]
    assert capsys.readouterr().out.splitlines()[-1] == "2 warnings"  # and the missing kettle


def test_a_class_without_training_boxes_is_named_with_its_validation_count(tmp_path, capsys):
    # Scenes 0-5 hold cups and kettles only; scenes 6 and 7 spoons, for validation only.
    root = write_voc(tmp_path / "voc", range(6), val=range(6, 8), classes=lambda index: (
        ("spoon",) * 3 if index >= 6 else ("cup", "kettle", "cup")))
    with pytest.warns(HealthWarning) as caught:
        assert main(check_argv(tmp_path / "out", voc_flags(root))) == 0
    assert health_warnings(caught) == [
        "census: voc:%s/train has no box of class spoon (4 in validation): the model cannot "
        "learn a class it never sees, its AP stays 0; add training images of it, or take it "
        "out of the class list" % root]
    train, val = capsys.readouterr().out.splitlines()[:2]
    assert train.endswith(", spoon 0") and val.endswith("classes: cup 0, kettle 0, spoon 4")


# ---- the first batch: refused when it carries no object, or matches no anchor --------------

def shrink_boxes_in_the_transform(monkeypatch, size):
    """A transform bug: every box's width and height become ``size`` (of the input)."""
    from zoo.jobs import train
    make = train.train_transform

    def broken(*args, **kwargs):
        transform = make(*args, **kwargs)

        def apply(image, label, rng):
            data, label = transform(image, label, rng)
            label = label.copy()
            label[:, 3:5] = label[:, 1:3] + size
            return data, label
        return apply
    monkeypatch.setattr(train, "train_transform", broken)


@pytest.mark.parametrize("size, message", [
    (0.0, " (images 000003, 000007, 000004, 000000): no object: their annotations hold 9 boxes "
          "but none reaches the network with an area (lost in the augmentation and resize)"),
    (1e-5, ": its 8 boxes match no anchor of %s: no box reaches the loss and nothing would be "
           "learnt" % NETWORK)], ids=["no-object", "no-positive-anchor"])
def test_a_first_batch_that_cannot_teach_is_refused_naming_the_split(shapes, tmp_path, size,
                                                                     message, capsys,
                                                                     monkeypatch):
    shrink_boxes_in_the_transform(monkeypatch, size)
    output = tmp_path / "out"
    assert main(train_argv(output, voc_flags(shapes, val=False))) == 1
    err = capsys.readouterr().err
    assert err.startswith("zoo train: error: first batch of voc:%s/train%s" % (shapes, message))
    assert err.endswith("look at %s\n" % (output / "train_batch0.png")) and err.count("\n") == 1
    assert os.path.isfile(output / "train_batch0.png")
    assert not [name for name in os.listdir(output) if name.endswith(".params")]


# ---- --skip-bad at training: the loader stops an epoch that lost too many images -----------

def test_the_loader_stops_an_epoch_that_skipped_more_than_max_skipped(tmp_path):
    root = write_voc(tmp_path / "voc", range(8))
    for index in (1, 4, 6):  # cut short, an end marker added: found only when decoded
        path = os.path.join(root, "JPEGImages", "%06d.jpg" % index)
        with open(path, "rb") as stream:
            data = stream.read()
        with open(path, "wb") as stream:
            stream.write(data[:len(data) * 7 // 10] + b"\xff\xd9")
    dataset = VOCDataset(root, "train")
    loader = DetectionLoader(dataset, 2, ValTransform(64), num_workers=1, skip_bad=True,
                             max_skipped=0.2)
    with pytest.raises(DataError, match=r"train\.txt: epoch 0: 3 of its 8 images could not be "
                                        r"read \(38%\), more than max_skipped 0\.2 "
                                        r"\(--max-skipped\) allows; first: "):
        list(loader.epoch(0))
    with pytest.warns(UserWarning, match="skipped 3 bad items"):
        assert len(list(DetectionLoader(dataset, 2, ValTransform(64), num_workers=1,
                                        skip_bad=True, max_skipped=0.5).epoch(0))) == 4
