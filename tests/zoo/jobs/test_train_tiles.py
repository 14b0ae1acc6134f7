"""``zoo train --tiles`` end to end, on data the zoo did not make (a COCO file of 1600x1200
JPEG birds, :func:`test_tiled_data.write_birds`): the artifact records its tiles, ``zoo
detect`` runs them unless told otherwise (and says so first), ``zoo eval`` scores whole
photos through the same tiled inference, so its figure is what detect's output scores; a
box cut by a tile's edge is found once."""
import json
import logging
import os

import cv2
import numpy as np
import pytest

from zoo.cli import main
from zoo.data import COCODataset
from zoo.inference.evaluation import voc_scores
from zoo.inference.tiles import DEFAULT_OVERLAP, Tiling
from zoo.jobs.detect import DetectOptions, detect

from test_health_loss import Lines
from test_tiled_data import HEIGHT, TILE, WIDTH, write_birds
from test_tiles import MarkerDetector, photo_with

NETWORK = "ssd_mobilenetv2_stride8"


def logged(name, argv):
    """``zoo ARGV`` in this process: ``(exit code, messages of the logger name)``."""
    lines, logger = Lines(), logging.getLogger(name)
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)  # under pytest the root logger's level is WARNING
    try:
        code = main(argv)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    return code, lines.messages


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One epoch of ``zoo train --tiles 400`` on 4 photos, validated on 2 others."""
    folder = str(tmp_path_factory.mktemp("tiled"))
    write_birds(folder, "train", 4, seed=2, empty=(3,))
    write_birds(folder, "val", 2, seed=3)
    output = os.path.join(folder, "train_out")
    data = ["--dataset", "coco", "--annotations", os.path.join(folder, "{split}.json"),
            "--image-dir", os.path.join(folder, "photos")]
    code, messages = logged("zoo.train", [
        "train", "--network", NETWORK, *data, "--data-shape", "192", "--batch-size", "4",
        "--epochs", "1", "--tiles", str(TILE), "--data-threads", "1", "--output-dir", output])
    assert code == 0
    return folder, os.path.join(output, NETWORK), messages


def detect_run(capsys, prefix, folder, output, *flags):
    """``zoo detect`` of the validation photos, every box kept: ``(results, messages)``."""
    code, messages = logged("zoo.jobs.detect", [
        "detect", "--checkpoint", prefix, os.path.join(folder, "photos", "val_*.jpg"),
        "--output", output, "--threshold", "0", "--max-detections", "100000", "--no-pictures",
        *flags])
    assert code == 0, capsys.readouterr().err
    with open(os.path.join(output, "results.json")) as stream:
        return json.load(stream), messages


def test_the_run_trains_every_photo_in_tiles_and_the_artifact_records_them(trained):
    _, prefix, messages = trained
    line = next(m for m in messages if m.startswith("tiles: "))
    assert "%d-pixel tiles overlapping %g of the 4 photos" % (TILE, DEFAULT_OVERLAP) in line
    assert " windows of 4 photos " in line  # the photo without a bird too
    # every bird lies whole in a tile: no whole photo is trained (its birds a few pixels)
    assert "(their tiles, and the 0 whole photos holding a box too large for a tile)" in line
    assert any(m.startswith("epoch 1: validation VOC07 mAP ") for m in messages)
    with open(prefix + "-0001.json") as stream:
        assert json.load(stream)["tiles"] == {"size": TILE, "overlap": DEFAULT_OVERLAP}


def test_detect_runs_the_artifacts_tiles_unless_told_otherwise(trained, tmp_path, capsys):
    folder, prefix, _ = trained
    results, messages = detect_run(capsys, prefix, folder, str(tmp_path / "default"))
    assert (results["settings"]["tiles"], results["settings"]["tile_overlap"]) == (
        TILE, DEFAULT_OVERLAP)
    assert messages[0].startswith("detecting in %d-pixel tiles overlapping %g" % (
        TILE, DEFAULT_OVERLAP)) and "--tiles 0" in messages[0]
    whole, messages = detect_run(capsys, prefix, folder, str(tmp_path / "whole"),
                                 "--tiles", "0")
    assert whole["settings"]["tiles"] is None and not messages
    other, _ = detect_run(capsys, prefix, folder, str(tmp_path / "other"),
                          "--tile-overlap", "0.4")
    assert (other["settings"]["tiles"], other["settings"]["tile_overlap"]) == (TILE, 0.4)
    # The tiles ran: the same photos give other boxes whole.
    assert ([len(image["detections"]) for image in results["images"]]
            != [len(image["detections"]) for image in whole["images"]])


def eval_run(folder, prefix, output, *flags):
    """``zoo eval`` of the validation split: its results JSON and its COCO detections."""
    assert main(["eval", "--checkpoint", prefix, "--dataset", "coco", "--annotations",
                 os.path.join(folder, "{split}.json"), "--image-dir",
                 os.path.join(folder, "photos"), "--split", "val", "--output", output,
                 *flags]) == 0
    with open(output) as stream:
        result = json.load(stream)
    with open(os.path.splitext(output)[0] + "-detections.json") as stream:
        return result, json.load(stream)


def test_eval_scores_whole_photos_as_detect_finds_them(trained, tmp_path, capsys):
    folder, prefix, _ = trained
    result, found = eval_run(folder, prefix, str(tmp_path / "eval.json"))
    assert result["tiles"] == {"size": TILE, "overlap": DEFAULT_OVERLAP}
    detected, _ = detect_run(capsys, prefix, folder, str(tmp_path / "detect"))
    # The same detections, photo by photo...
    for image in detected["images"]:
        name = os.path.basename(image["file"])
        scores = sorted(row["score"] for row in found
                        if os.path.basename(row["file_name"]) == name)
        assert len(scores) == len(image["detections"]) > 0
        np.testing.assert_allclose(scores, sorted(row["score"] for row in image["detections"]),
                                   atol=1e-5)
    # ... so the zoo's metric on detect's output gives eval's figure.
    dataset = COCODataset(os.path.join(folder, "val.json"), os.path.join(folder, "photos"))
    rows = {os.path.basename(image["file"]): np.array(
        [[row["class_id"], row["score"], *(np.array(row["box"]) / [WIDTH, HEIGHT, WIDTH, HEIGHT])]
         for row in image["detections"]], np.float32).reshape(-1, 6)
        for image in detected["images"]}
    scores = voc_scores(dataset, [rows[os.path.basename(path)] for path in dataset.file_names()])
    assert scores["voc07"]["mAP"] == pytest.approx(result["voc"]["voc07"]["mAP"], abs=1e-4)
    # Whole photos alone (--tiles 0) are another scoring, of other detections.
    untiled, untiled_found = eval_run(folder, prefix, str(tmp_path / "whole.json"),
                                      "--tiles", "0")
    assert untiled["tiles"] is None and len(untiled_found) != len(found)


def test_a_box_cut_by_a_tile_edge_is_found_once_in_the_tiles_a_detector_was_trained_on(
        tmp_path):
    """A detector recording tiles (as an artifact of ``zoo train --tiles`` does) runs them in
    ``zoo detect`` without ``--tiles``: a small square across the right edge of the first
    column of 300-pixel tiles (which start at x 0 and 225) is found once, whole."""
    square = (280, 400, 316, 436)
    cv2.imwrite(str(tmp_path / "big.png"), photo_with([square])[:, :, ::-1])
    detector = MarkerDetector()
    assert len(detector(str(tmp_path / "big.png"))) == 0  # too small for the full pass
    detector.tiles = Tiling(300)
    output = str(tmp_path / "out")
    summary = detect(DetectOptions(checkpoint="marker", inputs=(str(tmp_path / "big.png"),),
                                   output=output), detector=detector)
    assert summary.detections == 1
    with open(os.path.join(output, "results.json")) as stream:
        results = json.load(stream)
    assert results["settings"]["tiles"] == 300
    box = results["images"][0]["detections"][0]["box"]
    np.testing.assert_allclose(box, square, atol=3)
    # From Python too, unless told otherwise.
    np.testing.assert_allclose(detector(str(tmp_path / "big.png")).boxes, [box], atol=0.01)
    assert len(detector(str(tmp_path / "big.png"), tiles=0)) == 0


def test_the_repeated_batches_check_counts_what_a_tiled_epoch_draws(trained):
    # A tiled epoch draws the windows with boxes and a share of the empty ones, not every
    # window the dataset holds: measured against all of them the check cried wolf each epoch.
    _, prefix, _ = trained
    with open(prefix + "-health.json") as stream:
        check = json.load(stream)["checks"]["repeated batches"]
    assert check["status"] == "ok", check


@pytest.mark.parametrize("export_format, suffix", [("onnx", ".onnx"), ("openvino", ".xml")])
def test_an_exported_file_runs_the_tiles_its_artifact_was_trained_on(
        trained, tmp_path, capsys, export_format, suffix):
    folder, prefix, _ = trained
    exported = str(tmp_path / "deployed")
    assert main(["export", "--checkpoint", prefix, "--format", export_format,
                 "--output", exported]) == 0
    results, messages = detect_run(capsys, exported + suffix, folder, str(tmp_path / "tiled"))
    assert (results["settings"]["tiles"], results["settings"]["tile_overlap"]) == (
        TILE, DEFAULT_OVERLAP)
    assert messages[0].startswith("detecting in %d-pixel tiles" % TILE)
    whole, _ = detect_run(capsys, exported + suffix, folder, str(tmp_path / "whole"),
                          "--tiles", "0")
    assert whole["settings"]["tiles"] is None
    assert ([len(image["detections"]) for image in results["images"]]
            != [len(image["detections"]) for image in whole["images"]])


def overfit_run(folder, output, capsys, *flags):
    """``zoo train --overfit-batch`` on the first 2 items of ``folder``'s training file:
    the loss of its first step (from the line it passes with) and that line."""
    assert main(["train", "--network", NETWORK, "--dataset", "coco", "--annotations",
                 os.path.join(folder, "train.json"), "--image-dir",
                 os.path.join(folder, "photos"), "--val-split", "", "--data-shape", "192",
                 "--batch-size", "2", "--overfit-batch", "40", "--optimizer", "adam",
                 "--lr", "0.001", "--data-threads", "1", "--output-dir", output,
                 *flags]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("overfit-batch passed: the loss went from "), line
    return float(line.split()[6]), line


def test_overfit_batch_memorises_the_tiles_a_tiled_run_trains(tmp_path, capsys):
    """``--overfit-batch`` with ``--tiles`` proves the network learns what the run will train
    on, the birds large in their tiles: its batch is the first two windows of the epoch, the
    photo's first two tiles (a bird in each), not the two whole photos, the birds a few
    pixels there (another batch, another loss)."""
    folder = str(tmp_path)
    write_birds(folder, "train", 2, seed=4, first=[(100, 100, 150, 140), (450, 100, 500, 140)])
    tiled, line = overfit_run(folder, str(tmp_path / "tiled"), capsys, "--tiles", str(TILE))
    assert line.endswith(" on one batch of 2 windows"), line
    whole, line = overfit_run(folder, str(tmp_path / "whole"), capsys)
    assert line.endswith(" on one batch of 2 images"), line
    assert tiled != pytest.approx(whole, rel=0.01)
