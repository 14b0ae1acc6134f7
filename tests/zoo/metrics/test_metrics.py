"""VOC mean AP against GluonCV and hand-made cases; COCO AP through pycocotools; the box
convention of each dataset kind; tied scores."""
import dataclasses
import json
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
from gluoncv.utils.metrics.voc_detection import VOC07MApMetric, VOCMApMetric

from zoo.metrics import COCO_STAT_NAMES, VOCMeanAP, coco_detections, coco_ground_truth

CLASS_NAMES = ["cat", "dog", "car", "bus", "kite", "boat"]
# Classes with ground truth; "bus" (3) ground truth is always difficult, "kite" (4)
# is only ever predicted and "boat" (5) never appears: all three give NaN.
GT_CLASSES = (0, 1, 2, 3)
ALWAYS_DIFFICULT = 3
PREDICTED_ONLY = 4


def padded(rows, length, width):
    """``rows`` (k, width) followed by rows of -1 up to ``length``."""
    out = np.full((length, width), -1.0)
    out[:len(rows)] = rows
    return out


def random_gt(rng, max_gt):
    """One image's ground truth: clusters of overlapping boxes in a 500 px image."""
    count = rng.integers(0, max_gt + 1)
    cluster_centres = rng.uniform(100, 400, size=(2, 2))
    centres = cluster_centres[rng.integers(0, 2, count)] + rng.normal(0, 30, (count, 2))
    sizes = rng.uniform(20, 150, (count, 2))
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=1).round()
    labels = rng.choice(GT_CLASSES, count)
    difficult = (rng.random(count) < 0.2) | (labels == ALWAYS_DIFFICULT)
    return boxes, labels, difficult


def random_detections(rng, gt_boxes, gt_labels):
    """Jittered copies of ground truth (some duplicated, some mislabelled) plus clutter."""
    boxes, labels = [], []
    for box, label in zip(gt_boxes, gt_labels):
        size = np.tile(box[2:] - box[:2], 2)
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            boxes.append(box + rng.normal(0, rng.uniform(0.02, 0.3), 4) * size)
            labels.append(label if rng.random() > 0.1 else rng.integers(0, PREDICTED_ONLY + 1))
    for _ in range(rng.integers(0, 4)):
        corner = rng.uniform(0, 400, 2)
        boxes.append(np.concatenate([corner, corner + rng.uniform(10, 100, 2)]))
        labels.append(rng.integers(0, PREDICTED_ONLY + 1))
    order = rng.permutation(len(boxes))
    return np.reshape(boxes, (-1, 4))[order], np.array(labels)[order]


def synthetic_batches(seed, num_batches=4, batch_size=4, max_gt=6, max_det=16):
    """Batches of (pred boxes, labels, scores, gt boxes, labels, difficult), -1 padded."""
    rng = np.random.default_rng(seed)
    for _ in range(num_batches):
        batch = [[] for _ in range(6)]
        for _ in range(batch_size):
            gt_boxes, gt_labels, difficult = random_gt(rng, max_gt)
            boxes, labels = random_detections(rng, gt_boxes, gt_labels)
            boxes, labels = boxes[:max_det], labels[:max_det]
            scores = np.where(labels >= 0, rng.random(len(labels)), -1)
            for column, rows, length in zip(batch, (
                    boxes, labels[:, None], scores[:, None],
                    gt_boxes, gt_labels[:, None], difficult[:, None]),
                    (max_det, max_det, max_det, max_gt, max_gt, max_gt)):
                column.append(padded(rows, length, rows.shape[1]))
        boxes, labels, scores, gt_boxes, gt_labels, difficult = (np.stack(c) for c in batch)
        yield (boxes, labels[..., 0], scores[..., 0], gt_boxes, gt_labels[..., 0],
               difficult[..., 0])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("use_07_metric, gluoncv_metric",
                         [(True, VOC07MApMetric), (False, VOCMApMetric)])
@pytest.mark.parametrize("iou_thresh", [0.5, 0.7])
def test_voc_map_equals_gluoncv(seed, use_07_metric, gluoncv_metric, iou_thresh):
    ours = VOCMeanAP(CLASS_NAMES, iou_thresh=iou_thresh, use_07_metric=use_07_metric)
    theirs = gluoncv_metric(iou_thresh=iou_thresh, class_names=CLASS_NAMES)
    for batch in synthetic_batches(seed):
        ours.update(*batch)
        theirs.update(*batch)
    names, values = ours.get()
    their_names, their_values = theirs.get()
    assert names == their_names == CLASS_NAMES + ["mAP"]
    np.testing.assert_allclose(values, their_values, rtol=0, atol=1e-6)
    assert all(math.isnan(values[c]) for c in (ALWAYS_DIFFICULT, PREDICTED_ONLY, 5))
    assert 0.1 < values[-1] < 0.95, "synthetic data should give a non-trivial mAP"


def test_batching_and_reset_do_not_change_the_result():
    batches = list(synthetic_batches(seed=3))
    whole = VOCMeanAP(CLASS_NAMES)
    whole.update(*(np.concatenate(arrays) for arrays in zip(*batches)))
    split = VOCMeanAP(CLASS_NAMES)
    split.update(*batches[0])
    split.reset()
    for batch in batches:
        split.update(*batch)
    np.testing.assert_allclose(split.get()[1], whole.get()[1], rtol=0, atol=1e-12)


def single_image_ap(pred_boxes, pred_scores, gt_boxes, gt_difficult=None, **options):
    """Per-class AP dict for one image whose boxes are all class 0 of ["a", "b"]."""
    metric = VOCMeanAP(["a", "b"], **options)
    pred_boxes, gt_boxes = np.reshape(pred_boxes, (1, -1, 4)), np.reshape(gt_boxes, (1, -1, 4))
    difficult = None if gt_difficult is None else np.reshape(gt_difficult, (1, -1))
    metric.update(pred_boxes, np.zeros(pred_boxes.shape[:2]), np.reshape(pred_scores, (1, -1)),
                  gt_boxes, np.zeros(gt_boxes.shape[:2]), difficult)
    return metric


BOX_A, BOX_B = [10, 10, 60, 60], [100, 100, 180, 150]
FAR = [300, 300, 340, 340]


@pytest.mark.parametrize("use_07_metric", [True, False])
def test_perfect_detections_give_one(use_07_metric):
    metric = single_image_ap([BOX_A, BOX_B], [0.9, 0.3], [BOX_A, BOX_B],
                             use_07_metric=use_07_metric)
    assert metric.per_class()["a"] == 1.0
    assert math.isnan(metric.per_class()["b"])
    assert metric.mean_ap() == 1.0  # "b" has no ground truth: left out of the mean


def test_false_positive_above_true_positive():
    # Ranked hits: TP, FP, TP on two ground truths. Recall 0.5 at precision 1, then
    # recall 1 at precision 2/3: the 11 thresholds 0..0.5 see 1, 0.6..1 see 2/3.
    boxes, scores = [BOX_A, FAR, BOX_B], [0.9, 0.8, 0.7]
    voc07 = single_image_ap(boxes, scores, [BOX_A, BOX_B])
    area = single_image_ap(boxes, scores, [BOX_A, BOX_B], use_07_metric=False)
    assert voc07.mean_ap() == pytest.approx((6 * 1 + 5 * 2 / 3) / 11)
    assert area.mean_ap() == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    # A lone false positive ranked first halves the precision everywhere.
    assert single_image_ap([FAR, BOX_A], [0.9, 0.8], [BOX_A]).mean_ap() == pytest.approx(0.5)


def test_recall_of_exactly_three_tenths_misses_the_0_3_threshold():
    # As in GluonCV and py-faster-rcnn, the 0.3 threshold is np.arange's 0.30000000000000004.
    gt = [[50 * i, 0, 50 * i + 40, 40] for i in range(10)]
    assert single_image_ap(gt[:3], [0.9, 0.8, 0.7], gt).mean_ap() == pytest.approx(3 / 11)


def test_all_wrong_detections_give_zero():
    assert single_image_ap([FAR, BOX_B], [0.9, 0.8], [BOX_A]).mean_ap() == 0.0
    assert single_image_ap(np.zeros((0, 4)), [], [BOX_A]).mean_ap() == 0.0


def test_duplicate_is_a_false_positive():
    shifted = np.add(BOX_A, 2)
    assert single_image_ap([BOX_A, shifted], [0.9, 0.8], [BOX_A, BOX_B]).mean_ap() == \
        pytest.approx((6 * 1 + 5 * 0) / 11)


def test_difficult_is_neither_miss_nor_false_positive():
    metric = single_image_ap([BOX_B, BOX_A], [0.9, 0.8], [BOX_A, BOX_B], [0, 1])
    assert metric.mean_ap() == 1.0
    missed = single_image_ap([BOX_A], [0.8], [BOX_A, BOX_B], [0, 1])
    assert missed.mean_ap() == 1.0
    only_difficult = single_image_ap([BOX_A], [0.8], [BOX_A], [1])
    assert math.isnan(only_difficult.mean_ap())


def test_pixel_offset_matters_for_normalised_boxes():
    gt, pred = [0.1, 0.1, 0.3, 0.3], [0.2, 0.2, 0.4, 0.4]  # IoU 1/7 in continuous units
    assert single_image_ap([pred], [0.9], [gt], pixel_offset=0).mean_ap() == 0.0
    with pytest.warns(UserWarning, match="pixel_offset=0"):
        assert single_image_ap([pred], [0.9], [gt]).mean_ap() == 1.0  # +1 px: IoU near 1


def test_unknown_class_id_is_rejected():
    metric = VOCMeanAP(["a"])
    with pytest.raises(ValueError, match="class id 3"):
        metric.update(np.array([[BOX_A]]), np.full((1, 1), 3), np.ones((1, 1)),
                      np.array([[BOX_A]]), np.zeros((1, 1)))


def test_empty_metric_is_nan():
    names, values = VOCMeanAP(["a", "b"]).get()
    assert names == ["a", "b", "mAP"] and all(math.isnan(v) for v in values)


# COCO

COCO_CLASSES = ["cat", "dog"]
# Records shaped like zoo.data's: pixel corners, class ids (-1 padding), difficult flags.
COCO_RECORDS = [
    SimpleNamespace(width=640, height=480, class_ids=np.array([0, 1, -1]),
                    boxes=np.array([[100, 100, 200, 200], [300, 120, 500, 400], [-1, -1, -1, -1]]),
                    difficult=np.array([0, 0, 0])),
    SimpleNamespace(width=320, height=320, class_ids=np.array([1, 0]),
                    boxes=np.array([[10, 20, 110, 220], [150, 150, 300, 300]]),
                    difficult=np.array([False, True])),
]


def coco_dataset():
    """A dataset of :data:`COCO_RECORDS` (continuous corners), as COCO scoring reads one."""
    from zoo.data import DetectionDataset
    records = [SimpleNamespace(**vars(record), path="img%d.jpg" % index, key=index)
               for index, record in enumerate(COCO_RECORDS)]
    return DetectionDataset(records, COCO_CLASSES)


def rows_from_records(records, shift=0.0, skip_difficult=False):
    """Each image's detection rows repeating its ground truth (corners normalised to the
    image), shifted right by ``shift`` times the width, scores falling in listing order."""
    detections, score = [], 0.9
    for record in records:
        rows = []
        for box, class_id, difficult in zip(record.boxes, record.class_ids, record.difficult):
            if class_id < 0 or (difficult and skip_difficult):
                continue
            x1, y1, x2, y2 = box
            x1, x2 = x1 + shift * (x2 - x1), x2 + shift * (x2 - x1)
            rows.append([class_id, score, x1 / record.width, y1 / record.height,
                         x2 / record.width, y2 / record.height])
            score -= 0.1
        detections.append(np.array(rows, dtype=np.float64).reshape(-1, 6))
    return detections


def test_coco_ground_truth_from_records():
    gt = coco_ground_truth(COCO_RECORDS, COCO_CLASSES)
    assert gt["categories"] == [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]
    assert [image["id"] for image in gt["images"]] == [0, 1]
    assert [a["image_id"] for a in gt["annotations"]] == [0, 0, 1, 1]
    assert [a["id"] for a in gt["annotations"]] == [1, 2, 3, 4]
    assert gt["annotations"][0]["bbox"] == [100.0, 100.0, 100.0, 100.0]
    assert [a["iscrowd"] for a in gt["annotations"]] == [0, 0, 0, 1]
    assert len(coco_ground_truth(COCO_RECORDS, COCO_CLASSES, difficult="drop")["annotations"]) == 3
    with pytest.raises(ValueError, match="difficult"):
        coco_ground_truth(COCO_RECORDS, COCO_CLASSES, difficult="ignore")
    renamed = coco_ground_truth(COCO_RECORDS, COCO_CLASSES, image_ids=[42, 9])
    assert [a["image_id"] for a in renamed["annotations"]] == [42, 42, 9, 9]


def test_coco_perfect_detections(tmp_path, capsys):
    from zoo.inference.evaluation import coco_report
    results_json = tmp_path / "results.json"
    stats, per_class = coco_report(coco_dataset(), rows_from_records(COCO_RECORDS),
                                   results_json=str(results_json))
    assert list(stats) == list(COCO_STAT_NAMES)
    assert stats["AP"] == stats["AP50"] == stats["AP75"] == pytest.approx(1.0)
    assert per_class == pytest.approx({"cat": 1.0, "dog": 1.0, "mAP": 1.0})
    assert capsys.readouterr().out == ""
    written = json.loads(results_json.read_text())
    assert len(written) == 4 and set(written[0]) == {"image_id", "category_id", "bbox", "score",
                                                     "file_name"}
    assert {row["file_name"] for row in written} == {"img0.jpg", "img1.jpg"}


def test_coco_shift_lowers_ap75_not_ap50():
    from zoo.inference.evaluation import coco_report
    # A shift of a quarter of the width leaves IoU 0.75 / 1.25 = 0.6.
    stats, _ = coco_report(coco_dataset(), rows_from_records(COCO_RECORDS, shift=0.25))
    assert stats["AP50"] == pytest.approx(1.0)
    assert stats["AP75"] == pytest.approx(0.0)
    assert 0.0 < stats["AP"] < 0.5


def test_coco_difficult_objects_count_as_crowd_regions():
    from zoo.inference.evaluation import coco_report
    dataset = coco_dataset()
    detections = rows_from_records(COCO_RECORDS)
    detections[-1][-1, 1] = 1.0  # the detection on the difficult box ranks first
    assert coco_report(dataset, detections)[0]["AP"] == pytest.approx(1.0)  # it is ignored
    missed = rows_from_records(COCO_RECORDS, skip_difficult=True)
    assert coco_report(dataset, missed)[0]["AP"] == pytest.approx(1.0)  # and not missed
    missed[0] = missed[0][:1]  # an ordinary object missed lowers AP
    assert coco_report(dataset, missed)[0]["AP"] < 1.0


def test_coco_of_no_detections_is_zero():
    from zoo.inference.evaluation import coco_report
    stats, per_class = coco_report(coco_dataset(), [np.zeros((0, 6))] * len(COCO_RECORDS))
    assert stats["AP"] == 0.0 and per_class["mAP"] == 0.0


def test_coco_detections_from_model_output():
    rows = np.array([[1, 0.8, 0.25, 0.5, 0.75, 1.0], [-1, -1, -1, -1, -1, -1]])
    assert coco_detections(5, rows, width=640, height=480) == [
        {"image_id": 5, "category_id": 2, "bbox": [160.0, 240.0, 320.0, 240.0], "score": 0.8}]
    assert coco_detections(5, rows, 640, 480, category_ids=[11, 22])[0]["category_id"] == 22


# Tied scores

def tied_batch(seed, num_images=3, max_det=5):
    """One batch where at most 15 detections of a class exist in all and scores take
    three values, so ties abound (and include duplicates of one object)."""
    rng = np.random.default_rng(seed)
    batch = [[] for _ in range(6)]
    for _ in range(num_images):
        gt_boxes, gt_labels, difficult = random_gt(rng, 4)
        boxes, labels = random_detections(rng, gt_boxes, gt_labels)
        boxes = np.concatenate([np.minimum(boxes[:, :2], boxes[:, 2:]),
                                np.maximum(boxes[:, :2], boxes[:, 2:])], axis=1)[:max_det]
        labels = labels[:max_det]
        scores = rng.choice([0.3, 0.6, 0.9], len(labels))
        for column, rows, length in zip(batch, (
                boxes, labels[:, None], scores[:, None],
                gt_boxes, gt_labels[:, None], difficult[:, None]),
                (max_det, max_det, max_det, 4, 4, 4)):
            column.append(padded(rows, length, rows.shape[1]))
    boxes, labels, scores, gt_boxes, gt_labels, difficult = (np.stack(c) for c in batch)
    return boxes, labels[..., 0], scores[..., 0], gt_boxes, gt_labels[..., 0], difficult[..., 0]


def reversed_rows(batch):
    """The batch with every image's detections listed in reverse (ground truth unchanged)."""
    boxes, labels, scores, *ground_truth = batch
    return (boxes[:, ::-1], labels[:, ::-1], scores[:, ::-1], *ground_truth)


def both_maps(batch, **options):
    """Our ``(voc07 values, area values)`` of one batch."""
    values = []
    for use_07_metric in (True, False):
        metric = VOCMeanAP(CLASS_NAMES, use_07_metric=use_07_metric, **options)
        metric.update(*batch)
        values.append(metric.get()[1])
    return values


def gluoncv_maps(batch):
    """GluonCV's ``(VOC07MApMetric values, VOCMApMetric values)`` of one batch."""
    values = []
    for metric_class in (VOC07MApMetric, VOCMApMetric):
        metric = metric_class(iou_thresh=0.5, class_names=CLASS_NAMES)
        metric.update(*batch)
        values.append(metric.get()[1])
    return values


@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # GluonCV, all-NaN APs
def test_tied_scores_give_gluoncv_results():
    # GluonCV sorts with numpy's quicksort, stable up to 16 items: with at most 15
    # detections of a class its order of ties is well defined, and must be ours.
    order_mattered = 0
    for seed in range(40):
        batch = tied_batch(seed)
        for listing in (batch, reversed_rows(batch)):
            for ours, theirs in zip(both_maps(listing), gluoncv_maps(listing)):
                np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6,
                                           err_msg="seed %d" % seed)
        order_mattered += not np.allclose(both_maps(batch)[0], both_maps(reversed_rows(batch))[0],
                                          equal_nan=True)
    assert order_mattered >= 5, "the data should have ties whose order changes the AP"


def test_tie_order_is_documented_one():
    shifted = np.add(BOX_A, [3, 0, 3, 0])
    # One image: two tied detections of one object. The later one takes it; the earlier
    # duplicate, a false positive, ranks first: precision 1/2 at recall 1.
    assert single_image_ap([BOX_A, shifted], [0.9, 0.9], [BOX_A]).mean_ap() == 0.5
    # Two images, tied: the later image's detection ranks first.
    metric = VOCMeanAP(["a"])
    boxes = np.array([[FAR], [BOX_A]], dtype=float)
    gt = np.array([[BOX_A], [BOX_A]], dtype=float)
    difficult = np.array([[1], [0]])  # image 0's object is difficult: only image 1 counts
    metric.update(boxes, np.zeros((2, 1)), np.full((2, 1), 0.9), gt, np.zeros((2, 1)),
                  difficult)
    assert metric.mean_ap() == 1.0  # the true positive of image 1 ranks before image 0's miss
    metric.reset()
    metric.update(boxes[::-1], np.zeros((2, 1)), np.full((2, 1), 0.9), gt[::-1],
                  np.zeros((2, 1)), difficult[::-1])
    assert metric.mean_ap() == 0.5
    for voc07 in (True, False):  # and GluonCV agrees on the first case
        theirs = (VOC07MApMetric if voc07 else VOCMApMetric)(class_names=["a"])
        theirs.update(np.array([[BOX_A, shifted]], float), np.zeros((1, 2)),
                      np.full((1, 2), 0.9), np.array([[BOX_A]], float), np.zeros((1, 1)))
        assert theirs.get()[1][-1] == pytest.approx(0.5)


# Box conventions: each dataset kind is scored by its own

@pytest.fixture(scope="module")
def tiny_voc(tmp_path_factory):
    """A generated VOC folder: 4 validation images of 64 pixels, objects of 10-32 pixels."""
    from zoo.data import embedded
    return embedded.generate(str(tmp_path_factory.mktemp("conventions") / "voc"), seed=4,
                             num_train=1, num_val=4, image_size=64)


def near_detections(dataset, seed, jitter=1.5, clutter=2):
    """Per image, rows ``[class, score, x1, y1, x2, y2]`` normalised to the image: each
    object found with corners moved by up to ``jitter`` pixels, plus a few wrong boxes;
    scores take three values, so some tie."""
    rng = np.random.default_rng(seed)
    detections = []
    for record in dataset.records:
        rows = []
        for box, class_id in zip(record.boxes, record.class_ids):
            moved = box + rng.uniform(-jitter, jitter, 4)
            rows.append([class_id, 0, *np.concatenate([np.minimum(moved[:2], moved[2:]),
                                                       np.maximum(moved[:2], moved[2:])])])
        for _ in range(clutter):
            corner = rng.uniform(0, 40, 2)
            rows.append([rng.integers(len(dataset.class_names)), 0, *corner,
                         *(corner + rng.uniform(5, 20, 2))])
        rows = np.array(rows, dtype=np.float64)
        rows[:, 1] = rng.choice([0.4, 0.7, 0.95], len(rows))
        rows[:, 2:] /= [record.width, record.height] * 2
        detections.append(rows)
    return detections


def as_continuous(dataset, one_pixel_more):
    """A continuous-convention copy of ``dataset`` with ``one_pixel_more`` added to x2, y2."""
    from zoo.data import DetectionDataset
    records = [dataclasses.replace(r, boxes=r.boxes + np.float32([0, 0, 1, 1]) * one_pixel_more)
               for r in dataset.records]
    return DetectionDataset(records, dataset.class_names, box_convention="continuous")


def grown_by_a_pixel(dataset, detections):
    """Detections with x2, y2 one pixel further (in each image's normalised units)."""
    return [rows + np.concatenate([[0, 0, 0, 0], [1 / r.width, 1 / r.height]])
            for r, rows in zip(dataset.records, detections)]


def test_voc_dataset_is_scored_inclusive_and_equals_gluoncv(tiny_voc):
    from zoo.data import VOCDataset
    from zoo.inference.evaluation import voc_scores

    dataset = VOCDataset(tiny_voc, "val")
    assert dataset.box_convention == "inclusive"
    detections = near_detections(dataset, seed=3, jitter=4)
    scores = voc_scores(dataset, detections)
    for use_07, name, gluoncv_metric in ((True, "voc07", VOC07MApMetric),
                                         (False, "voc_area", VOCMApMetric)):
        theirs = gluoncv_metric(class_names=dataset.class_names)
        for offset, metric in ((1, theirs), (0, None)):
            ours = VOCMeanAP(dataset.class_names, use_07_metric=use_07, pixel_offset=offset)
            for record, rows in zip(dataset.records, detections):
                pixels = rows[:, 2:] * ([record.width, record.height] * 2)
                inputs = (pixels[None], rows[None, :, 0], rows[None, :, 1], record.boxes[None],
                          record.class_ids[None], record.difficult[None])
                ours.update(*inputs)
                if metric is not None:
                    metric.update(*inputs)
            if offset == 1:
                assert scores[name] == dict(zip(*ours.get()))
                np.testing.assert_allclose(ours.get()[1], theirs.get()[1], rtol=0, atol=1e-6)
            else:
                assert scores[name]["mAP"] != pytest.approx(ours.get()[1][-1], abs=1e-3)


def test_coco_dataset_is_scored_continuous(tiny_voc, tmp_path):
    from zoo.data import COCODataset, VOCDataset
    from zoo.inference.evaluation import coco_report, voc_scores

    voc = VOCDataset(tiny_voc, "val")
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(coco_ground_truth(voc.records, voc.class_names, image_ids=[
        1, 2, 3, 4]) | {"images": [{"id": i, "file_name": os.path.basename(r.path),
                                   "width": r.width, "height": r.height}
                                  for i, r in enumerate(voc.records, 1)]}))
    coco = COCODataset(str(path), os.path.join(tiny_voc, "JPEGImages"))
    assert coco.box_convention == "continuous"
    detections = near_detections(voc, seed=3, jitter=4)
    # The same rows on the same boxes: the conventions give different numbers...
    assert voc_scores(coco, detections)["voc07"]["mAP"] != \
        pytest.approx(voc_scores(voc, detections)["voc07"]["mAP"], abs=1e-3)
    assert coco_report(coco, detections)[0]["AP"] != \
        pytest.approx(coco_report(voc, detections)[0]["AP"], abs=1e-3)
    # ...and the COCO dataset's VOC score is the offset-0 metric's.
    ours = VOCMeanAP(coco.class_names, pixel_offset=0)
    for record, rows in zip(coco.records, detections):
        pixels = rows[:, 2:] * ([record.width, record.height] * 2)
        ours.update(pixels[None], rows[None, :, 0], rows[None, :, 1], record.boxes[None],
                    record.class_ids[None], record.difficult[None])
    assert voc_scores(coco, detections)["voc07"] == dict(zip(*ours.get()))


def test_inclusive_boxes_score_as_continuous_boxes_a_pixel_larger(tiny_voc):
    # Both metrics: an inclusive box x1..x2 covers the pixels of the continuous x1..x2+1.
    from zoo.data import VOCDataset
    from zoo.inference.evaluation import coco_report, voc_scores

    inclusive = VOCDataset(tiny_voc, "val")
    detections = near_detections(inclusive, seed=2)
    continuous = as_continuous(inclusive, one_pixel_more=1)
    grown = grown_by_a_pixel(inclusive, detections)
    for name, values in voc_scores(inclusive, detections).items():
        np.testing.assert_allclose(list(values.values()),
                                   list(voc_scores(continuous, grown)[name].values()),
                                   rtol=0, atol=1e-9)
    np.testing.assert_allclose(list(coco_report(inclusive, detections)[0].values()),
                               list(coco_report(continuous, grown)[0].values()), rtol=0, atol=1e-9)
    ungrown = as_continuous(inclusive, one_pixel_more=0)
    assert coco_report(ungrown, detections)[0]["AP"] != \
        pytest.approx(coco_report(inclusive, detections)[0]["AP"], abs=1e-3)


def test_coco_report_of_a_continuous_dataset_equal_pycocotools(tiny_voc):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from zoo.data import VOCDataset
    from zoo.inference.evaluation import coco_report

    dataset = as_continuous(VOCDataset(tiny_voc, "val"), one_pixel_more=0)
    detections = near_detections(dataset, seed=3, jitter=3)
    gt, results = COCO(), []
    gt.dataset = {"images": [], "annotations": [], "categories": [
        {"id": i + 1, "name": name} for i, name in enumerate(dataset.class_names)]}
    for image_id, (record, rows) in enumerate(zip(dataset.records, detections)):
        gt.dataset["images"].append({"id": image_id, "width": record.width,
                                     "height": record.height})
        for (x1, y1, x2, y2), class_id, difficult in zip(record.boxes.tolist(),
                                                         record.class_ids, record.difficult):
            gt.dataset["annotations"].append({
                "id": len(gt.dataset["annotations"]) + 1, "image_id": image_id,
                "category_id": int(class_id) + 1, "bbox": [x1, y1, x2 - x1, y2 - y1],
                "area": (x2 - x1) * (y2 - y1), "iscrowd": int(difficult)})
        for class_id, score, x1, y1, x2, y2 in rows * ([1, 1] + [record.width, record.height] * 2):
            results.append({"image_id": image_id, "category_id": int(class_id) + 1,
                            "score": score, "bbox": [x1, y1, x2 - x1, y2 - y1]})
    gt.createIndex()
    evaluator = COCOeval(gt, gt.loadRes(results), "bbox")
    evaluator.evaluate()
    evaluator.accumulate()
    evaluator.summarize()
    ours = coco_report(dataset, detections)[0]
    assert 0.1 < ours["AP"] < 0.9
    np.testing.assert_allclose(list(ours.values()), evaluator.stats, rtol=0, atol=1e-9)


def test_packed_datasets_keep_their_convention(tiny_voc, tmp_path):
    from zoo.data import DetectionDataset, LstDataset, RecordDataset, VOCDataset
    from zoo.data.recordio import write_record_files

    voc = VOCDataset(tiny_voc, "val")
    prefix = str(tmp_path / "voc")
    write_record_files(voc, prefix)
    with open(prefix + ".box_convention.txt") as stream:
        assert stream.read() == "inclusive\n"
    images = os.path.join(tiny_voc, "JPEGImages")
    assert LstDataset(prefix + ".lst", image_root=images).box_convention == "inclusive"
    assert RecordDataset(prefix + ".rec").box_convention == "inclusive"
    write_record_files(DetectionDataset(voc.records, voc.class_names), str(tmp_path / "coco"))
    assert RecordDataset(str(tmp_path / "coco.rec")).box_convention == "continuous"
    os.remove(prefix + ".box_convention.txt")  # as packed by other tools: im2rec's reading
    assert RecordDataset(prefix + ".rec").box_convention == "continuous"
