"""``zoo train --overfit-batch`` on every architecture of the zoo: a loss or target bug in any
registered model fails here, as a model that cannot memorise one batch.

A model's losses and targets are its architecture's graph builder's (symbols/ssd.py;
rpn.py, faster_rcnn.py, fpn.py and rcnn_targets.py for Faster R-CNN), the same whatever
its backbone; Faster R-CNN's ``rcnn_convention`` changes how the anchors, proposals and
pyramid levels its targets are made from come out. So each (architecture, convention) of
the registered models is memorised once, keeping every setting of one registered model
of it but the backbone, which is MobileNetV2 (the cheapest), at a small input and ROI
count (a YAML config on that model: the user's route)."""
import os

import pytest

import zoo
from zoo.cli import main
from zoo.config.loading import resolve
from test_health_model import write_coco

C4_ROIS = {"rpn_post_nms_top_n_train": 64, "rpn_post_nms_top_n_test": 32,
           "rcnn_batch_rois": 16}
"""Faster R-CNN's proposals and sampled ROIs per image at the test's 96-pixel inputs: C4 runs
its backbone's last stage on each ROI, few suffice."""
FPN_ROIS = {"rpn_post_nms_top_n_train": 200, "rpn_post_nms_top_n_test": 50,
            "rcnn_batch_rois": 32}
"""The FPN's: with 64 proposals from five levels and 16 ROIs its box head's loss jumps
from step to step (one well-classified ROI, then a new one), and may take more than 40
steps to settle."""
FAMILIES = {
    # (architecture, rcnn_convention): (the registered model, what puts it on MobileNetV2,
    # input side, batch size: Faster R-CNN's usual one image; SSD's smallest maps are 1 x 1,
    # whose batch statistics need two)
    ("ssd", None): ("ssd_mobilenetv2_stride8", {}, 192, 2),
    ("faster_rcnn", "zoo"): ("faster_rcnn_mobilenetv2", C4_ROIS, 96, 1),
    ("faster_rcnn", "gluoncv"): ("faster_rcnn_resnet50_gluoncv_voc", dict(
        C4_ROIS, backbone="mobilenetv2", rpn_feature="c4", head_stage="c5"), 96, 1),
    ("faster_rcnn_fpn", "zoo"): ("faster_rcnn_fpn_mobilenetv2", FPN_ROIS, 96, 1),
    ("faster_rcnn_fpn", "gluoncv"): ("faster_rcnn_fpn_resnet50_gluoncv_coco", dict(
        FPN_ROIS, backbone="mobilenetv2", fpn_features="[c2, c3, c4, c5]"), 96, 1),
}


def family(name):
    """The (architecture, convention) of a registered model."""
    spec = resolve(zoo.get_config(name), {})
    return spec["arch"], None if spec["arch"] == "ssd" else spec["rcnn_convention"]


def test_the_families_cover_every_registered_model():
    assert {family(name) for name in zoo.list_models()} == set(FAMILIES)
    assert all(family(model) == key for key, (model, *_) in FAMILIES.items())


@pytest.fixture(scope="module")
def two_images(tmp_path_factory):
    """A COCO split of two 90 x 70 PNG pictures, a square and a bar."""
    root = str(tmp_path_factory.mktemp("two"))
    write_coco(root, "train", 2, seed=5)
    return root


SLOW = {("faster_rcnn_fpn", "gluoncv")}
"""Families run by ``make test-slow`` only: the FPN on GluonCV's convention costs as much as
the other four together (30 s), and its convention's losses and targets are the C4 one's,
which ``make test`` runs."""


@pytest.mark.parametrize("key", [pytest.param(key, marks=[pytest.mark.slow] if key in SLOW
                                              else []) for key in sorted(FAMILIES, key=str)],
                         ids=lambda key: "-".join(part for part in key if part))
def test_every_architecture_memorises_one_batch(key, two_images, tmp_path, capsys):
    model, changes, side, batch = FAMILIES[key]
    config = tmp_path / (model + ".yaml")
    config.write_text("base: %s\n" % model + "".join(
        "%s: %s\n" % item for item in changes.items()))
    assert main(["train", "--network", str(config), "--dataset", "coco",
                 "--data-root", two_images, "--annotations",
                 os.path.join(two_images, "{split}.json"), "--image-dir",
                 os.path.join(two_images, "images"), "--data-shape", str(side),
                 "--batch-size", str(batch), "--overfit-batch", "40", "--optimizer", "adam",
                 "--lr", "0.001", "--output-dir", str(tmp_path), "--no-progress",
                 "--data-threads", "1"]) == 0
    assert capsys.readouterr().out.startswith("overfit-batch passed: the loss went from ")
