"""Pascal VOC detection mean average precision: VOC07 11-point and area under the PR curve.

Results agree with GluonCV's ``VOC07MApMetric`` / ``VOCMApMetric`` fed the same inputs:
the same greedy matching, the same "+1 pixel" box sizes by default and the same
11 recall thresholds.
"""
import warnings

import numpy as np

from ..boxes import iou as box_iou
from .arrays import to_numpy

# The recall thresholds 0, 0.1, ..., 1 exactly as py-faster-rcnn and GluonCV compute
# them: np.arange rounds 0.3, 0.6 and 0.7 a hair upwards, so a recall of exactly 3/10
# does not reach the 0.3 threshold. Kept so that results agree with theirs.
VOC07_RECALL_THRESHOLDS = np.arange(0.0, 1.1, 0.1)

# Match flags of a detection. IGNORED detections hit a difficult ground truth: they
# count neither as true nor as false positives.
FALSE_POSITIVE, TRUE_POSITIVE, IGNORED = 0, 1, -1


def match_detections(boxes, gt_boxes, gt_difficult, iou_thresh, pixel_offset):
    """Match flags of one image's detections of one class, ``boxes`` sorted by falling score.

    Greedy VOC matching: each detection looks only at the ground truth it overlaps
    most. Below ``iou_thresh`` it is a false positive; on a difficult ground truth it
    is ignored; on a ground truth an earlier detection took it is a false positive
    (a duplicate); otherwise it is a true positive and takes that ground truth.
    """
    flags = np.full(len(boxes), FALSE_POSITIVE, dtype=np.int8)
    if len(boxes) == 0 or len(gt_boxes) == 0:
        return flags
    iou = box_iou(boxes, gt_boxes, pixel_offset)
    best_gt = iou.argmax(axis=1)
    best_iou = iou[np.arange(len(boxes)), best_gt]
    taken = np.zeros(len(gt_boxes), dtype=bool)
    for index, (gt, overlap) in enumerate(zip(best_gt, best_iou)):
        if overlap < iou_thresh:
            continue
        if gt_difficult[gt]:
            flags[index] = IGNORED
        elif not taken[gt]:
            flags[index] = TRUE_POSITIVE
            taken[gt] = True
    return flags


def precision_recall(scores, flags, num_positives):
    """Recall and precision after each detection, taken by falling score (stable for ties)."""
    flags = flags[np.argsort(-scores, kind="stable")]
    flags = flags[flags != IGNORED]
    true_positives = np.cumsum(flags == TRUE_POSITIVE)
    return true_positives / num_positives, true_positives / np.arange(1, len(flags) + 1)


def precision_envelope(precision):
    """The highest precision reached at each point or any later one (higher recall)."""
    return np.maximum.accumulate(precision[::-1])[::-1]


def average_precision_11_point(recall, precision):
    """VOC07 AP: mean over 11 recall thresholds of the best precision at that recall or more."""
    if len(recall) == 0:
        return 0.0
    first_reaching = np.searchsorted(recall, VOC07_RECALL_THRESHOLDS, side="left")
    reached = first_reaching[first_reaching < len(recall)]
    return float(precision_envelope(precision)[reached].sum() / len(VOC07_RECALL_THRESHOLDS))


def average_precision_area(recall, precision):
    """VOC2010+ AP: area under the precision envelope as a step function of recall."""
    if len(recall) == 0:
        return 0.0
    recall_steps = np.diff(recall, prepend=0.0)
    return float(np.sum(recall_steps * precision_envelope(precision)))


def all_within_unit_square(boxes, labels):
    """True if there are boxes not marked padding and all lie in [0, 1], as normalised ones do."""
    real = boxes[labels.reshape(boxes.shape[:-1]) >= 0]
    return real.size > 0 and real.min() >= 0 and real.max() <= 1


def mean_ignoring_nan(values):
    """Mean of the values that are not NaN; NaN (without a warning) if all are."""
    valid = values[~np.isnan(values)]
    return float(valid.mean()) if valid.size else float("nan")


class VOCMeanAP:
    """Per-class AP and their mean over a dataset, accumulated batch by batch.

    ``class_names`` names class ids 0..K-1. ``use_07_metric`` picks the VOC07 11-point
    AP, otherwise the area under the PR curve. Boxes are corners (x1, y1, x2, y2);
    widths are ``x2 - x1 + pixel_offset``. The default 1 is GluonCV's choice and the VOC
    devkit's for inclusive integer corners (x2 is the last pixel, as GluonCV's VOC
    loader gives them). Continuous corners, where x2 is one past the last pixel (as in
    ``zoo.data`` records) or normalised to [0, 1] (model output), need ``pixel_offset=0``:
    with 1, normalised boxes all overlap almost completely (``update`` warns then).
    Difficult ground truth is neither needed (not a miss) nor a false positive when
    detected. A class without non-difficult ground truth has AP NaN and is left out of
    the mean.
    """

    def __init__(self, class_names, iou_thresh=0.5, use_07_metric=True, pixel_offset=1):
        self.class_names = list(class_names)
        self.iou_thresh = iou_thresh
        self.use_07_metric = use_07_metric
        self.pixel_offset = pixel_offset
        self.reset()

    def reset(self):
        """Forget every update."""
        num_classes = len(self.class_names)
        self._num_positives = np.zeros(num_classes, dtype=np.int64)
        self._scores = [[] for _ in range(num_classes)]
        self._flags = [[] for _ in range(num_classes)]

    def update(self, pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels,
               gt_difficults=None):
        """Add one batch, called like GluonCV's ``VOCMApMetric.update``.

        Predictions: boxes (B, N, 4), labels and scores (B, N) (or (B, N, 1)).
        Ground truth: boxes (B, M, 4), labels (B, M) and optional difficult flags (B, M).
        Rows whose label is negative are padding. numpy arrays or MXNet NDArrays.
        """
        pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels = (
            to_numpy(a) for a in (pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels))
        if self.pixel_offset and all_within_unit_square(gt_boxes, gt_labels):
            warnings.warn("VOCMeanAP: ground-truth boxes look normalised to [0, 1] but "
                          "pixel_offset=%g adds that much to every width and height; "
                          "pass pixel_offset=0 for normalised boxes" % self.pixel_offset,
                          stacklevel=2)
        if gt_difficults is None:
            gt_difficults = np.zeros(gt_labels.shape[:2], dtype=bool)
        for image in zip(pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels,
                         to_numpy(gt_difficults)):
            self._update_image(*image)

    def _update_image(self, boxes, labels, scores, gt_boxes, gt_labels, gt_difficult):
        """Add one image's detections and ground truth, padding rows included."""
        labels, scores = labels.reshape(-1), scores.reshape(-1)
        kept = labels >= 0
        boxes, labels, scores = boxes[kept], labels[kept].astype(int), scores[kept]
        gt_labels = gt_labels.reshape(-1)
        gt_kept = gt_labels >= 0
        gt_boxes, gt_labels = gt_boxes[gt_kept], gt_labels[gt_kept].astype(int)
        gt_difficult = gt_difficult.reshape(-1)[gt_kept].astype(bool)
        self._check_class_ids(np.concatenate([labels, gt_labels]))
        for class_id in np.unique(np.concatenate([labels, gt_labels])):
            is_class, is_gt_class = labels == class_id, gt_labels == class_id
            order = np.argsort(-scores[is_class], kind="stable")
            flags = match_detections(boxes[is_class][order], gt_boxes[is_gt_class],
                                     gt_difficult[is_gt_class], self.iou_thresh,
                                     self.pixel_offset)
            self._scores[class_id].append(scores[is_class][order])
            self._flags[class_id].append(flags)
            self._num_positives[class_id] += np.count_nonzero(~gt_difficult[is_gt_class])

    def _check_class_ids(self, class_ids):
        """Raise ValueError for a class id without a name."""
        unknown = class_ids[class_ids >= len(self.class_names)]
        if unknown.size:
            raise ValueError("class id %d out of range: %d class names given"
                             % (unknown[0], len(self.class_names)))

    def _class_aps(self):
        """AP of every class as a numpy array, NaN where there is no positive."""
        average_precision = (average_precision_11_point if self.use_07_metric
                             else average_precision_area)
        aps = np.full(len(self.class_names), np.nan)
        for class_id, num_positives in enumerate(self._num_positives):
            if num_positives == 0:
                continue
            scores = np.concatenate(self._scores[class_id] or [np.zeros(0)])
            flags = np.concatenate(self._flags[class_id] or [np.zeros(0, dtype=np.int8)])
            aps[class_id] = average_precision(*precision_recall(scores, flags, num_positives))
        return aps

    def mean_ap(self):
        """Mean of the per-class APs that are not NaN; NaN if all are."""
        return mean_ignoring_nan(self._class_aps())

    def per_class(self):
        """Dictionary of class name to AP."""
        return dict(zip(self.class_names, self._class_aps().tolist()))

    def get(self):
        """``(names, values)``: the class names then 'mAP', and their APs (like GluonCV)."""
        aps = self._class_aps()
        return self.class_names + ["mAP"], aps.tolist() + [mean_ignoring_nan(aps)]
