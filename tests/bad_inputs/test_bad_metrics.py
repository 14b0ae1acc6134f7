"""Bad input to the metrics: each row is one mistake and the one-line error it must give,
naming the argument (or record, image, detection, file) and the value."""
from types import SimpleNamespace

import numpy as np
import pytest

from zoo.data import DetectionDataset, RecordDataset
from zoo.data.conventions import pixel_offset
from zoo.errors import DataError
from zoo.inference.evaluation import coco_report, voc_scores
from zoo.metrics import VOCMeanAP, coco_detections, coco_ground_truth
from zoo.metrics.coco import coco_evaluator

NAMES = ["cat", "dog"]
BOX, OTHER = [10.0, 10.0, 60.0, 60.0], [100.0, 100.0, 180.0, 150.0]


def voc_update(**changes):
    """``VOCMeanAP(NAMES).update`` of one image with two detections and two objects,
    ``changes`` replacing arguments."""
    arguments = dict(pred_boxes=np.array([[BOX, OTHER]]), pred_labels=np.array([[0, 1]]),
                     pred_scores=np.array([[0.9, 0.8]]), gt_boxes=np.array([[BOX, OTHER]]),
                     gt_labels=np.array([[0, 1]]), gt_difficults=np.array([[0, 0]]))
    arguments.update(changes)
    VOCMeanAP(NAMES).update(**arguments)


def record(**changes):
    """A record like zoo.data's (two objects in a 320x240 image), ``changes`` applied."""
    fields = dict(width=320, height=240, boxes=np.array([BOX, OTHER]),
                  class_ids=np.array([0, 1]), difficult=np.array([False, False]))
    return SimpleNamespace(**{**fields, **changes})


def detection(**changes):
    """A COCO result dict for image 0, category 1, ``changes`` applied."""
    return {**{"image_id": 0, "category_id": 1, "bbox": [10, 10, 50, 50], "score": 0.9},
            **changes}


def coco_eval_of(*detections):
    """pycocotools' run (:func:`zoo.metrics.coco.coco_evaluator`, what
    :func:`zoo.inference.evaluation.coco_report` scores with) of COCO result dicts
    ``detections`` against the ground truth of one :func:`record`."""
    return coco_evaluator(coco_ground_truth([record()], NAMES), list(detections))


def rows(*values):
    """A (N, 6) array of detection rows ``[class, score, x1, y1, x2, y2]``."""
    return np.array(values, dtype=float).reshape(-1, 6)


DATASET = DetectionDataset([record()], NAMES)


def bad_sidecar(tmp_path, content):
    """A ``.rec`` pack whose ``.box_convention.txt`` holds ``content``; its dataset."""
    (tmp_path / "a.rec").write_bytes(b"")
    (tmp_path / "a.idx").write_text("0\t0\n")
    (tmp_path / "a.classes.txt").write_text("cat\n")
    (tmp_path / "a.box_convention.txt").write_bytes(content)
    return RecordDataset(str(tmp_path / "a.rec"))


CASES = [
    # VOCMeanAP arguments
    ("no class names", lambda: VOCMeanAP([]), ValueError, "class_names=[]: expected a non-empty"),
    ("class name not text", lambda: VOCMeanAP(["cat", 3]), ValueError, "['cat', 3]"),
    ("repeated class name", lambda: VOCMeanAP(["cat", "cat"]), ValueError,
     "class_names repeat a name"),
    ("iou_thresh 0", lambda: VOCMeanAP(NAMES, iou_thresh=0), ValueError,
     "iou_thresh=0: expected a number in (0, 1]"),
    ("iou_thresh 1.5", lambda: VOCMeanAP(NAMES, iou_thresh=1.5), ValueError, "iou_thresh=1.5"),
    ("iou_thresh text", lambda: VOCMeanAP(NAMES, iou_thresh="0.5"), ValueError,
     "iou_thresh='0.5'"),
    ("pixel_offset 0.5", lambda: VOCMeanAP(NAMES, pixel_offset=0.5), ValueError,
     "pixel_offset=0.5: expected 1 (inclusive corners) or 0"),
    # VOCMeanAP.update shapes
    ("boxes of 3 values", lambda: voc_update(pred_boxes=np.zeros((1, 2, 3))), ValueError,
     "pred_boxes has shape (1, 2, 3)"),
    ("boxes not batched", lambda: voc_update(gt_boxes=np.array([BOX, OTHER])), ValueError,
     "gt_boxes has shape (2, 4)"),
    ("more labels than boxes", lambda: voc_update(pred_labels=np.array([[0, 1, 1]])),
     ValueError, "pred_labels has shape (1, 3)"),
    ("fewer scores than boxes", lambda: voc_update(pred_scores=np.array([[0.9]])), ValueError,
     "pred_scores has shape (1, 1) and type float64: expected numbers of shape (1, 2)"),
    ("gt labels of another length", lambda: voc_update(gt_labels=np.array([[0]])), ValueError,
     "gt_labels has shape (1, 1)"),
    ("difficult flags of another length", lambda: voc_update(gt_difficults=np.array([[0]])),
     ValueError, "gt_difficults has shape (1, 1)"),
    ("two images of predictions, one of ground truth",
     lambda: voc_update(pred_boxes=np.array([[BOX, OTHER]] * 2),
                        pred_labels=np.array([[0, 1]] * 2), pred_scores=np.ones((2, 2))),
     ValueError, "pred_boxes has 2 images, gt_boxes 1"),
    ("labels as text", lambda: voc_update(pred_labels=np.array([["cat", "dog"]])), ValueError,
     "pred_labels has shape (1, 2) and type <U3"),
    # VOCMeanAP.update values
    ("fractional class id", lambda: voc_update(pred_labels=np.array([[0.5, 1]])), ValueError,
     "pred_labels[0, 0] is 0.5: expected an integer"),
    ("NaN class id", lambda: voc_update(gt_labels=np.array([[0, np.nan]])), ValueError,
     "gt_labels[0, 1] is nan: expected an integer"),
    ("predicted class without a name", lambda: voc_update(pred_labels=np.array([[0, 2]])),
     ValueError, "class id 2 out of range: 2 class names given"),
    ("ground truth class without a name", lambda: voc_update(gt_labels=np.array([[7, 1]])),
     ValueError, "class id 7 out of range"),
    ("NaN score", lambda: voc_update(pred_scores=np.array([[0.9, np.nan]])), ValueError,
     "pred_scores[0, 1] is nan: expected a finite number"),
    ("infinite score", lambda: voc_update(pred_scores=np.array([[np.inf, 0.8]])), ValueError,
     "pred_scores[0, 0] is inf"),
    ("NaN predicted box", lambda: voc_update(pred_boxes=np.array([[BOX, [1, 2, np.nan, 4]]])),
     ValueError, "pred_boxes[0, 1] is [1, 2, nan, 4]: expected corners x1 <= x2"),
    ("inverted predicted box", lambda: voc_update(pred_boxes=np.array([[[60, 10, 10, 60], BOX]])),
     ValueError, "pred_boxes[0, 0] is [60, 10, 10, 60]"),
    ("inverted ground-truth box", lambda: voc_update(gt_boxes=np.array([[BOX, [5, 9, 8, 2]]])),
     ValueError, "gt_boxes[0, 1] is [5, 9, 8, 2]: expected corners x1 <= x2, y1 <= y2"),
    ("difficult flag 0.5", lambda: voc_update(gt_difficults=np.array([[0, 0.5]])), ValueError,
     "gt_difficults[0, 1] is 0.5: expected an integer"),
    # COCO ground truth from records
    ("record with more boxes than class ids",
     lambda: coco_ground_truth([record(class_ids=np.array([0]))], NAMES), ValueError,
     "record 0: 2 boxes, 1 class ids and 2 difficult flags"),
    ("record class without a name",
     lambda: coco_ground_truth([record(), record(class_ids=np.array([0, 5]))], NAMES),
     ValueError, "record 1: class id 5 out of range: 2 class names given"),
    ("image ids of another count",
     lambda: coco_ground_truth([record()], NAMES, image_ids=[1, 2]), ValueError,
     "2 image ids for 1 records"),
    ("ground truth pixel_offset 2", lambda: coco_ground_truth([record()], NAMES, pixel_offset=2),
     ValueError, "pixel_offset=2: expected 1 (inclusive corners) or 0"),
    # COCO detections from model rows
    ("rows of 5 values", lambda: coco_detections(3, np.zeros((2, 5)), 320, 240), ValueError,
     "image 3: detections have shape (2, 5): expected (N, 6)"),
    ("row class without a category",
     lambda: coco_detections(3, rows([2, 0.9, 0.1, 0.1, 0.5, 0.5]), 320, 240,
                             category_ids=[1, 2]), ValueError, "class id 2 has no category"),
    ("fractional row class", lambda: coco_detections(3, rows([0.5, 0.9, 0, 0, 1, 1]), 320, 240),
     ValueError, "class id 0.5 has no category"),
    ("NaN row score", lambda: coco_detections(3, rows([0, np.nan, 0, 0, 1, 1]), 320, 240),
     ValueError, "image 3: detection [0, nan, 0, 0, 1, 1] has a non-finite value"),
    ("inverted row box", lambda: coco_detections(3, rows([1, 0.9, 0.5, 0, 0.2, 1]), 320, 240),
     ValueError, "is an inverted box (need x1 <= x2, y1 <= y2)"),
    # COCO results given to pycocotools
    ("result without a score", lambda: coco_eval_of({"image_id": 0, "category_id": 1,
                                                     "bbox": [1, 2, 3, 4]}), ValueError,
     "detection 0: {'image_id': 0, 'category_id': 1, 'bbox': [1, 2, 3, 4]}: expected image_id, "
     "category_id, bbox [x, y, w, h] and score numbers (KeyError: 'score')"),
    ("result bbox of 3 values", lambda: coco_eval_of(detection(), detection(bbox=[1, 2, 3])),
     ValueError, "detection 1: bbox [1.0, 2.0, 3.0], score 0.9: expected 4 finite numbers"),
    ("result of negative width", lambda: coco_eval_of(detection(bbox=[50, 10, -40, 50])),
     ValueError, "with w, h >= 0"),
    ("result score infinite", lambda: coco_eval_of(detection(score=float("inf"))), ValueError,
     "score inf: expected 4 finite numbers"),
    ("result category id as text", lambda: coco_eval_of(detection(category_id="cat")),
     ValueError, "(ValueError: invalid literal for int() with base 10: 'cat')"),
    ("result of an unknown category", lambda: coco_eval_of(detection(category_id=7)),
     ValueError, "detections of category ids not in the ground truth: [7]"),
    ("result on an unknown image", lambda: coco_eval_of(detection(image_id=4)), ValueError,
     "detections on image ids not in the ground truth: [4]"),
    # Scoring a dataset
    ("VOC scores of more detection arrays than images",
     lambda: voc_scores(DATASET, [rows(), rows()]), ValueError,
     "2 detection arrays for the 1 images of DetectionDataset(1 images, 2 classes)"),
    ("COCO scores of no detection arrays", lambda: coco_report(DATASET, []), ValueError,
     "0 detection arrays for the 1 images"),
    # Box conventions
    ("unknown dataset convention",
     lambda: DetectionDataset([record()], NAMES, box_convention="half"), ValueError,
     "box convention 'half': expected one of inclusive, continuous"),
    ("unknown convention name", lambda: pixel_offset("voc"), ValueError,
     "box convention 'voc': expected one of inclusive, continuous"),
]


@pytest.mark.parametrize("call, error, expected", [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_bad_metric_input_gives_one_line(call, error, expected):
    with pytest.raises(error) as raised:
        call()
    message = str(raised.value)
    assert expected in message and "\n" not in message


@pytest.mark.parametrize("content, expected", [
    (b"inclusive pixels\n", "a.box_convention.txt: box convention 'inclusive pixels': "
                            "expected one of inclusive, continuous"),
    (b"", "a.box_convention.txt: box convention '': expected one of"),
    (b"\xff\xfe", "a.box_convention.txt: cannot read the box convention: 'utf-8' codec"),
], ids=["unknown word", "empty file", "not text"])
def test_bad_box_convention_file_names_it(tmp_path, content, expected):
    with pytest.raises(DataError) as raised:
        bad_sidecar(tmp_path, content)
    message = str(raised.value)
    assert message.startswith(str(tmp_path)) and expected in message and "\n" not in message
