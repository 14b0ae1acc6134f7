"""The input size is a choice at inference: ``zoo detect``, ``zoo eval`` and ``zoo export``
take ``--data-shape`` and ``--max-size`` (a Faster R-CNN's short side and long-side limit),
:func:`zoo.open_detector` ``data_shape`` and ``max_size``; a size changes what the network
sees, an export records it, and a size the model cannot take is refused in one line."""
import json
import os

import cv2
import pytest

import zoo
from zoo import artifact
from zoo.cli import main
from zoo.data import embedded
from zoo.inference.detector import MXNetEngine

from factories import initialised_artifact, one_error_line, smooth_image

PHOTO = (240, 320)
"""(height, width) of the photo detected on: short side 240."""


@pytest.fixture(scope="module")
def rcnn_prefix(tmp_path_factory):
    """A Faster R-CNN artifact (C4, MobileNetV2) trained at short side 128, long side 224."""
    return initialised_artifact(str(tmp_path_factory.mktemp("rcnn") / "rcnn"),
                                "faster_rcnn_mobilenetv2", embedded.CLASSES, data_shape=128,
                                max_size=224)


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("photo") / "photo.jpg")
    assert cv2.imwrite(path, smooth_image(*PHOTO, seed=3))
    return path


@pytest.fixture
def seen(monkeypatch):
    """The shapes of the batches MXNet runs, as the network sees them."""
    shapes = []
    launch = MXNetEngine.launch

    def recording(self, data, im_info):
        shapes.append(data.shape[2:])
        return launch(self, data, im_info)
    monkeypatch.setattr(MXNetEngine, "launch", recording)
    return shapes


def detect(capsys, *argv):
    status = main(["detect", "--no-progress", *argv])
    return status, capsys.readouterr()


def test_detect_runs_at_the_size_asked_and_records_it(rcnn_prefix, photo, tmp_path, capsys,
                                                      seen):
    status, _ = detect(capsys, "--checkpoint", rcnn_prefix, photo,
                       "--output", str(tmp_path / "default"))
    assert status == 0 and seen == [(128, 176)]  # 128 x 171, on a canvas of 16s
    status, _ = detect(capsys, "--checkpoint", rcnn_prefix, photo, "--output",
                       str(tmp_path / "big"), "--data-shape", "200", "--max-size", "400")
    assert status == 0 and seen[1:] == [(208, 272)]  # 200 x 267
    results = json.loads((tmp_path / "big" / "results.json").read_text())
    assert results["settings"]["data_shape"] == [200, 400]
    status, _ = detect(capsys, "--checkpoint", rcnn_prefix, photo, "--output",
                       str(tmp_path / "long"), "--max-size", "150")
    assert status == 0 and seen[2:] == [(112, 160)]  # the long side limits: 113 x 150


def test_open_detector_takes_the_size(rcnn_prefix, photo, seen):
    detector = zoo.open_detector(rcnn_prefix, data_shape=160, max_size=320)
    detector(photo)
    assert seen == [(160, 224)]
    assert detector.preprocessing["short_side"] == 160
    assert zoo.load_detector(rcnn_prefix, data_shape=96).preprocessing["short_side"] == 96


@pytest.mark.parametrize("argv, words", [
    (["--data-shape", "300"], ["data_shape 300 is over max_size 224 (the checkpoint's)",
                               "give max_size 300 or more"]),
    (["--data-shape", "8"], ["data_shape 8: under 16", "give 16 or more"]),
    (["--max-size", "100"], ["data_shape 128 (the checkpoint's) is over max_size 100"]),
])
def test_detect_refuses_a_size_the_model_cannot_take(rcnn_prefix, photo, tmp_path, capsys,
                                                     argv, words):
    status = main(["detect", "--checkpoint", rcnn_prefix, photo, "--output",
                   str(tmp_path / "out"), *argv])
    line = one_error_line(capsys, "detect")
    assert status != 0 and all(word in line for word in words), line
    assert not os.path.exists(tmp_path / "out" / "results.json")


def test_an_ssd_runs_only_at_its_own_side(detect_prefix, photo, tmp_path, capsys):
    """An SSD's anchors are laid out for its square side: another is refused, its own is
    taken, and --max-size (which it has not) is refused too."""
    status = main(["detect", "--checkpoint", detect_prefix, photo, "--output",
                   str(tmp_path / "a"), "--data-shape", "256"])
    line = one_error_line(capsys, "detect")
    assert status != 0 and "runs only at the square input it was built for, 128" in line
    status = main(["eval", "--checkpoint", detect_prefix, "--dataset", "voc", "--data-root",
                   str(tmp_path), "--max-size", "500"])
    line = one_error_line(capsys, "eval")
    assert status != 0 and "no long-side limit" in line
    assert zoo.open_detector(detect_prefix, data_shape=128).preprocessing["data_shape"] == \
        [128, 128]
    status = main(["export", "--checkpoint", detect_prefix, "--data-shape", "600", "--output",
                   str(tmp_path / "ssd600"), "--no-progress"])
    line = one_error_line(capsys, "export")
    assert status != 0 and "data_shape 600" in line
    assert not any(name.startswith("ssd600") for name in os.listdir(tmp_path))


def test_eval_scores_at_the_size_asked(rcnn_prefix, shapes, tmp_path, capsys, seen):
    output = tmp_path / "eval.json"
    status = main(["eval", "--checkpoint", rcnn_prefix, "--dataset", "voc", "--data-root",
                   shapes, "--split", "val", "--data-shape", "96", "--max-size", "96",
                   "--output", str(output), "--no-progress"])
    assert status == 0, capsys.readouterr().err
    assert seen and all(shape == (96, 96) for shape in seen)  # 128-pixel squares at 96
    assert json.loads(output.read_text())["data_shape"] == [96, 96]


def test_export_records_the_size_in_every_format(rcnn_prefix, photo, tmp_path, capsys, seen):
    """``zoo export --data-shape`` was ignored (exit 0, the training size kept): the export
    now records it, and a detector of the export runs at it."""
    out = str(tmp_path / "at160")
    assert main(["export", "--checkpoint", rcnn_prefix, "--data-shape", "160", "--max-size",
                 "320", "--output", out, "--no-progress"]) == 0
    assert artifact.load(out).preprocessing["short_side"] == 160
    zoo.open_detector(out)(photo)
    assert seen == [(160, 224)]
    pytest.importorskip("onnxruntime")
    assert main(["export", "--checkpoint", rcnn_prefix, "--data-shape", "160", "--max-size",
                 "320", "--format", "onnx", "--output", out, "--no-progress"]) == 0
    capsys.readouterr()
    deployed = zoo.open_detector(out + ".onnx")
    assert deployed.preprocessing["short_side"] == 160
    batch = next(deployed.runner.batches(zoo.inference.runner.ImageList([photo]), 1))
    assert batch.data.shape[2:] == (160, 224)
    # and the size can be chosen again when the export is opened
    assert zoo.open_detector(out + ".onnx", data_shape=96).preprocessing["data_shape"] == \
        [96, 320]
