"""`zoo train --fit-anchors` (issue 48): SSD anchor sizes fitted to the training boxes, the
best possible recall before and after printed and recorded in the artifact, and the fitted
anchors in the graph `zoo.load_detector` and `zoo detect` run. The recall is measured here
on the test's own boxes, with anchors laid out as MXNet's MultiBoxPrior lays them out,
independently of zoo.schema.anchors."""
import json
import logging
import re
import warnings

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

    # zoo detect runs the artifact's graph, whose anchors are the fitted ones
    with open(prefix + "-symbol.json") as stream:
        nodes = json.load(stream)["nodes"]
    priors = [node["attrs"]["sizes"] for node in nodes if node["op"] == "_contrib_MultiBoxPrior"]
    assert [[float(v) for v in text.strip("()[]").split(",")] for text in priors] == \
        fitted["sizes"]
    capsys.readouterr()
    assert main(["detect", "--checkpoint", prefix, data[5], "--output",
                 str(tmp_path / "detect"), "--no-pictures", "--no-progress"]) == 0
    with open(tmp_path / "detect" / "results.json") as stream:
        results = json.load(stream)
    assert results["complete"] and len(results["images"]) == 6
    assert results["category_ids"] == [16]
