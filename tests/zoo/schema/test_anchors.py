"""`zoo train --fit-anchors` (issue 48): SSD anchor sizes fitted to the training boxes (and
ratios, for boxes far from square), the best possible recall before and after printed and
recorded in the artifact, and the fitted anchors in the graph `zoo.load_detector` and
`zoo detect` run and `zoo export` writes. The recall is measured here
on the test's own boxes, with anchors laid out as MXNet's MultiBoxPrior lays them out,
independently of zoo.schema.anchors."""
import json
import logging
import os
import re
import warnings

import cv2
import numpy as np

import zoo
from zoo.cli import main

from test_health_sizes import NETWORK, input_sides, write_birds

IOU = 0.5                              # the SSD config's overlap_threshold


def prior_anchors(sizes, ratios, side):
    """``(A, 2)`` anchor widths and heights in pixels, per MultiBoxPrior: every size at the
    first ratio, then the first size at the others (w = s * sqrt(r), h = s / sqrt(r))."""
    shapes = []
    for per_map, ratio in zip(sizes, ratios):
        pairs = [(s, ratio[0]) for s in per_map] + [(per_map[0], r) for r in ratio[1:]]
        shapes += [(s * side * r ** 0.5, s * side / r ** 0.5) for s, r in pairs]
    return np.array(shapes)


def recall(boxes, anchors):
    """The share of ``boxes`` ``(N, 2)`` (width, height) some anchor centred on it covers at
    IoU >= :data:`IOU`."""
    best = []
    for w, h in boxes:
        inter = np.minimum(w, anchors[:, 0]) * np.minimum(h, anchors[:, 1])
        best.append((inter / (w * h + anchors.prod(axis=1) - inter)).max())
    return float(np.mean(np.array(best) >= IOU))


def test_fit_anchors_raises_the_recall_and_the_artifact_detects_with_them(tmp_path, caplog,
                                                                          capsys):
    data, boxes = write_birds(str(tmp_path / "birds"))
    output = tmp_path / "run"
    with caplog.at_level(logging.INFO), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["train", "--network", NETWORK, "--fit-anchors", "--epochs", "1",
                     "--batch-size", "2", "--data-threads", "1", "--output-dir", str(output),
                     *data]) == 0
    # fitted, the anchors go no lower than the stride: most birds stay below it, and the
    # census says so, with the flags left (tests/zoo/engine/health/test_health_sizes.py)
    census = [str(w.message) for w in caught if str(w.message).startswith("census: ")]
    assert len(census) == 1 and "--tiles" in census[0] and "--fit-anchors" not in census[0]
    line = next(record.getMessage() for record in caplog.records
                if record.getMessage().startswith("anchors fitted"))
    match = re.search(r"the (\d+) boxes of .*: best possible recall (\d+)% -> (\d+)% at IoU "
                      r"0.5; sizes (.*) \(--fit-anchors\)$", line)
    assert match, line

    # the box set is the test's: its sides at the 192 input, its recall before and after
    prefix = str(output / NETWORK)
    config = zoo.get_model(NETWORK).config
    fitted = zoo.load_detector(prefix).model.config
    assert fitted["ratios"] == config["ratios"]
    assert [len(s) for s in fitted["sizes"]] == [len(s) for s in config["sizes"]]
    assert fitted["sizes"] != config["sizes"]
    widths = boxes[:, 2] * 192 / 1600
    heights = boxes[:, 3] * 192 / 1200
    sides = np.column_stack([widths, heights])
    np.testing.assert_allclose(np.sqrt(sides.prod(axis=1)), input_sides(boxes))
    before = recall(sides, prior_anchors(config["sizes"], config["ratios"], 192))
    after = recall(sides, prior_anchors(fitted["sizes"], fitted["ratios"], 192))
    assert int(match.group(1)) == len(boxes)
    assert (int(match.group(2)), int(match.group(3))) == (round(100 * before),
                                                          round(100 * after))
    assert after > before
    assert match.group(4) == " ".join("[%s]" % ", ".join("%g" % s for s in sizes)
                                      for sizes in fitted["sizes"])
    # no anchor below its map's stride (8 pixels at 192), sizes growing from map to map
    smallest = [min(sizes) for sizes in fitted["sizes"]]
    assert smallest == sorted(smallest) and smallest[0] * 192 >= 8 - 0.01

    # recorded in the artifact: the options and the before/after
    with open(prefix + "-0001.json") as stream:
        meta = json.load(stream)
    assert meta["training"]["run"]["fit_anchors"] is True
    assert meta["training"]["health"]["checks"]["anchors"]["detail"] in line

    # resumed without them, its heads would predict offsets from other anchors: refused
    capsys.readouterr()
    assert main(["train", "--network", NETWORK, "--epochs", "2", "--batch-size", "2",
                 "--output-dir", str(output), "--resume", "auto", *data]) != 0
    assert "%s-0001 was trained with --fit-anchors: resume it with --fit-anchors" % prefix \
        in capsys.readouterr().err

    # zoo detect runs the artifact's graph, whose anchors are the fitted ones
    with open(prefix + "-symbol.json") as stream:
        nodes = json.load(stream)["nodes"]
    priors = [node["attrs"]["sizes"] for node in nodes if node["op"] == "_contrib_MultiBoxPrior"]
    assert [[float(v) for v in text.strip("()[]").split(",")] for text in priors] == \
        fitted["sizes"]
    capsys.readouterr()
    assert main(["detect", "--checkpoint", prefix, data[5], "--output",
                 str(tmp_path / "detect"), "--no-pictures"]) == 0
    with open(tmp_path / "detect" / "results.json") as stream:
        results = json.load(stream)
    assert results["complete"] and len(results["images"]) == 6
    assert results["category_ids"] == [16]

    # zoo export bakes the same anchors into the ONNX graph: zoo detect on it finds what
    # the artifact's graph finds, its anchor-sized boxes included
    onnx_path = str(tmp_path / "export" / "birds.onnx")
    assert main(["export", "--checkpoint", prefix, "--format", "onnx", "--output",
                 onnx_path]) == 0
    assert main(["detect", "--checkpoint", onnx_path, data[5], "--output",
                 str(tmp_path / "detect-onnx"), "--no-pictures"]) == 0
    with open(tmp_path / "detect-onnx" / "results.json") as stream:
        exported = json.load(stream)
    for ours, theirs in zip(results["images"], exported["images"]):
        assert ours["file"] == theirs["file"]
        mine = np.array([d["box"] for d in ours["detections"]])
        other = np.array([d["box"] for d in theirs["detections"]])
        assert len(mine) == len(other) > 0
        # the same boxes, but for the order of equal scores (an untrained head's) and the
        # few a tie at the last place swaps
        found = (np.abs(other[:, None] - mine[None]).max(axis=2) < 0.5).any(axis=1)
        assert found.mean() > 0.9, found.mean()


def write_poles(folder, photos=4, seed=0):
    """A COCO file of ``photos`` 640x480 JPEGs with 3 poles each, 8-12 pixels wide and
    150-250 tall (far thinner than any SSD anchor); returns the flags and ``(N, 4)`` boxes."""
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(folder, "photos"), exist_ok=True)
    images, annotations = [], []
    for index in range(photos):
        image = rng.randint(90, 160, (480, 640, 3), dtype=np.uint8)
        for _ in range(3):
            w, h = int(rng.uniform(8, 12)), int(rng.uniform(150, 250))
            x, y = int(rng.randint(0, 640 - w)), int(rng.randint(0, 480 - h))
            image[y:y + h, x:x + w] = (20, 30, 40)
            annotations.append({"id": len(annotations) + 1, "image_id": index + 1,
                                "category_id": 7, "bbox": [x, y, w, h], "iscrowd": 0})
        cv2.imwrite(os.path.join(folder, "photos", "%d.jpg" % index), image)
        images.append({"id": index + 1, "file_name": "%d.jpg" % index, "width": 640,
                       "height": 480})
    path = os.path.join(folder, "poles.json")
    with open(path, "w") as stream:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": 7, "name": "pole"}]}, stream)
    return (["--dataset", "coco", "--annotations", path, "--image-dir",
             os.path.join(folder, "photos"), "--val-split", ""],
            np.array([a["bbox"] for a in annotations], np.float64))


def test_fit_anchors_gives_thin_boxes_thin_anchors(tmp_path, capsys):
    data, boxes = write_poles(str(tmp_path / "poles"))
    argv = ["check-data", "--network", NETWORK, "--batch-size", "2", "--batches", "1",
            "--data-threads", "1", "--output-dir", str(tmp_path / "check"), *data]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    # their shape, not their size, is what no anchor matches: --fit-anchors is the way out
    census = [str(w.message) for w in caught if str(w.message).startswith("census: ")]
    assert len(census) == 1 and "its anchors can match only 0% of the 12 training boxes" \
        in census[0] and "--fit-anchors (best possible recall then" in census[0], census
    capsys.readouterr()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")      # the zoom-out's, at the default --max-expand
        assert main(argv + ["--fit-anchors"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    match = re.search(r"best possible recall (\d+)% -> (\d+)% at IoU 0.5; sizes (.*); ratios "
                      r"(.*) \(--fit-anchors\)$", line)
    assert match, line
    sizes, ratios = ([[float(v) for v in part.split(", ")]
                      for part in re.findall(r"\[([^]]*)\]", group)]
                     for group in match.group(3, 4))
    config = zoo.get_model(NETWORK).config
    assert [len(r) for r in ratios] == [len(r) for r in config["ratios"]]
    sides = np.column_stack([boxes[:, 2] * 192 / 640, boxes[:, 3] * 192 / 480])
    before = recall(sides, prior_anchors(config["sizes"], config["ratios"], 192))
    after = recall(sides, prior_anchors(sizes, ratios, 192))
    assert (int(match.group(1)), int(match.group(2))) == (round(100 * before),
                                                          round(100 * after))
    assert before == 0 and after > 0.5
    # tall anchors, each map's ratios still distinct and within the schema's 0.05-20
    assert all(min(r) < 0.2 and len(set(r)) == len(r) and min(r) >= 0.05 for r in ratios)


def test_fit_anchors_fits_the_rpn_anchors_of_a_feature_pyramid(tmp_path, capsys):
    """Faster R-CNN FPN: one anchor size per level, in pixels; the RPN's anchors of size s and
    ratio r (height / width) are s / sqrt(r) wide and s * sqrt(r) tall, positive from IoU
    0.7. The photos' short side goes to 600 unless the long side passes 1000: x0.5 here."""
    data, boxes = write_birds(str(tmp_path / "birds"))
    network = "faster_rcnn_fpn_mobilenetv2"
    capsys.readouterr()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert main(["check-data", "--network", network, "--fit-anchors", "--batch-size", "1",
                     "--batches", "1", "--data-threads", "1", "--output-dir",
                     str(tmp_path / "check"), *data]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    match = re.search(r"best possible recall (\d+)% -> (\d+)% at IoU 0.7; anchor_sizes "
                      r"\[(.*)\] \(--fit-anchors\)$", line)
    assert match, line
    fitted = [float(v) for v in match.group(3).split(", ")]
    config = zoo.get_model(network).config
    assert config["rcnn_convention"] == "zoo" and len(fitted) == len(config["anchor_sizes"])

    def rpn_recall(sizes):
        anchors = np.array([(s / r ** 0.5, s * r ** 0.5) for s in sizes
                            for r in config["anchor_ratios"]])
        sides = boxes[:, 2:] * 0.5
        inter = (np.minimum(sides[:, None, 0], anchors[None, :, 0])
                 * np.minimum(sides[:, None, 1], anchors[None, :, 1]))
        iou = inter / (sides.prod(axis=1)[:, None] + anchors.prod(axis=1)[None] - inter)
        return float((iou.max(axis=1) >= 0.7).mean())
    before, after = rpn_recall(config["anchor_sizes"]), rpn_recall(fitted)
    assert (int(match.group(1)), int(match.group(2))) == (round(100 * before),
                                                          round(100 * after))
    assert after > before
    # each level's anchor at least its stride (4, 8, ... pixels), growing level to level
    assert fitted == sorted(fitted) and all(
        size >= stride for size, stride in zip(fitted, (4, 8, 16, 32, 64)))
