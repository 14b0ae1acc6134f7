"""Boxes of no area are no detections: a graph that predicts them (here an SSD whose first
map pushes one anchor's boxes off the image's left edge, where they are clipped to
``[0, y1, 0, y2]``, as a trained FPN gave ``[0, 1200, 0, 0]``) yields none of them in any
runtime (MXNet, ONNX Runtime, OpenVINO), through ``zoo.open_detector``, ``zoo detect
--crops`` (no 1x1 crops) and ``zoo eval`` alike; what remains lies inside the image."""
import json
import os

import cv2
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.cli import main
from zoo.data import embedded
from zoo.onnx.export import export_artifact
from zoo.onnx.openvino_runtime import write_ir

from factories import TINY_SSD, smooth_image

SIZE = (96, 160)
"""The photo's (height, width)."""
KINDS = ["artifact", ".onnx", ".xml"]
ONE_PIXEL = 1.0
"""The least width and height of a box kept, in the image's pixels
(zoo.inference.runner.MIN_BOX_PIXELS)."""


def degenerate_ssd(prefix):
    """A tiny SSD artifact of the embedded dataset's classes at ``prefix`` whose first map's
    first anchor predicts, everywhere, a box ten anchor widths left of the image scoring 0.93
    for "circle" (clipped by the graph to zero width), and whose other anchors predict real
    boxes scoring about 0.5 to 0.6 (class logits scaled up, as factories.spread_ssd_artifact
    does)."""
    model = zoo.get_model("ssd_mobilenetv2_stride8", num_classes=len(embedded.CLASSES),
                          class_names=list(embedded.CLASSES), **TINY_SSD)
    arg_params, _ = model.init_params(seed=0)
    rng = np.random.RandomState(0)
    for name, value in arg_params.items():
        if name.endswith("_cls_weight"):
            value[:] = value * 20
        if name.endswith("_cls_bias"):
            value[:] = rng.uniform(-1, 3, value.shape)
    # Anchor 0's channels: its dx (loc channel 0), its 5 class logits (background first).
    arg_params["head0_loc_weight"][0] = 0
    arg_params["head0_loc_bias"][0] = -100
    arg_params["head0_cls_weight"][0:5] = 0
    arg_params["head0_cls_bias"][0:5] = np.array([0, 4, 0, 0, 0], np.float32)
    artifact.export(model, prefix)
    return prefix


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """``{kind: checkpoint}``: the degenerate SSD as an artifact, an ONNX file and an
    OpenVINO IR."""
    folder = tmp_path_factory.mktemp("degenerate")
    prefix = degenerate_ssd(str(folder / "ssd"))
    onnx_path = str(folder / "ssd.onnx")
    export_artifact(artifact.load(prefix), onnx_path)
    return {"artifact": prefix, ".onnx": onnx_path,
            ".xml": write_ir(onnx_path, str(folder / "ssd.xml"), {"dtype": "fp32"})}


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("photo") / "photo.png")
    assert cv2.imwrite(path, smooth_image(*SIZE, seed=0))
    return path


def has_area(boxes, width, height):
    """Whether every box (N, 4 corners in pixels) lies in the image and is at least
    :data:`ONE_PIXEL` wide and high."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    inside = (boxes >= 0).all() and (boxes[:, 0::2] <= width).all() and \
        (boxes[:, 1::2] <= height).all()
    return bool(inside and (boxes[:, 2:] - boxes[:, :2] >= ONE_PIXEL).all())


@pytest.mark.parametrize("kind", KINDS)
def test_boxes_of_no_area_are_no_detections_in_any_runtime(kind, checkpoints, photo):
    height, width = SIZE
    found = zoo.open_detector(checkpoints[kind])(photo)
    assert len(found) > 0, "the real boxes stay"
    assert has_area(found.boxes, width, height), found


@pytest.mark.parametrize("kind", KINDS)
def test_zoo_detect_writes_no_crop_of_a_box_of_no_area(kind, checkpoints, photo, tmp_path):
    output = str(tmp_path / "detect")
    assert main(["detect", "--checkpoint", checkpoints[kind], photo, "--crops",
                 "--output", output]) == 0
    with open(os.path.join(output, "results.json")) as stream:
        (picture,) = json.load(stream)["images"]
    detections = picture["detections"]
    assert detections and has_area([d["box"] for d in detections], SIZE[1], SIZE[0])
    crops = [cv2.imread(os.path.join(output, d["crop"])) for d in detections]
    assert sorted(os.path.join(folder, name) for folder, _, names in
                  os.walk(os.path.join(output, "crops")) for name in names) == sorted(
        os.path.join(output, d["crop"]) for d in detections)
    assert min(min(crop.shape[:2]) for crop in crops) > 1, "no 1x1 crop"


@pytest.mark.parametrize("kind", KINDS)
def test_zoo_eval_scores_no_box_of_no_area(kind, checkpoints, shapes, tmp_path):
    output = str(tmp_path / "eval.json")
    assert main(["eval", "--checkpoint", checkpoints[kind], "--data-root", shapes,
                 "--split", "val", "--output", output]) == 0
    with open(str(tmp_path / "eval-detections.json")) as stream:
        found = json.load(stream)
    assert found
    # COCO [x, y, width, height] of the dataset's inclusive corners: width x2 - x1 + 1
    sizes = np.array([result["bbox"][2:] for result in found]) - 1
    assert (sizes >= ONE_PIXEL).all(), sizes.min(axis=0)
