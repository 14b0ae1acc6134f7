"""Pascal VOC detection mean average precision: VOC07 11-point and area under the PR curve.

Results agree with GluonCV's ``VOC07MApMetric`` / ``VOCMApMetric`` fed the same inputs:
the same greedy matching, the same "+1 pixel" box sizes by default, the same order for
tied scores (:func:`by_falling_score`) and the same 11 recall thresholds.
"""
import numbers
import warnings

import numpy as np

from symbols.boxes import iou as box_iou
from zoo.metrics.arrays import as_text, check_pixel_offset, to_numpy

__all__ = ["VOCMeanAP"]

# The recall thresholds 0, 0.1, ..., 1 exactly as py-faster-rcnn and GluonCV compute
# them: np.arange rounds 0.3, 0.6 and 0.7 a hair upwards, so a recall of exactly 3/10
# does not reach the 0.3 threshold. Kept so that results agree with theirs.
VOC07_RECALL_THRESHOLDS = np.arange(0.0, 1.1, 0.1)

# Match flags of a detection. IGNORED detections hit a difficult ground truth: they
# count neither as true nor as false positives.
FALSE_POSITIVE, TRUE_POSITIVE, IGNORED = 0, 1, -1


def by_falling_score(scores):
    """Indices ordering ``scores`` from highest to lowest; equal scores in reverse order.

    This is GluonCV's ``scores.argsort()[::-1]`` made deterministic: GluonCV sorts with
    numpy's default quicksort, which keeps equal scores in order only up to 16 of them,
    so for larger arrays its order of ties is whatever that sort leaves. A stable sort
    reversed gives the order GluonCV gets whenever its sort happens to be stable.
    """
    return np.argsort(scores, kind="stable")[::-1]


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
    """Recall and precision after each detection, taken by :func:`by_falling_score`."""
    flags = flags[by_falling_score(scores)]
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


def checked_class_names(class_names):
    """``class_names`` as a list; ValueError if empty, repeated or not all strings."""
    names = list(class_names)
    if not names or not all(isinstance(name, str) for name in names):
        raise ValueError("VOCMeanAP: class_names=%r: expected a non-empty list of strings"
                         % (names[:10],))
    if len(set(names)) != len(names):
        raise ValueError("VOCMeanAP: class_names repeat a name: %r" % (names[:10],))
    return names


def checked_batch(pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels, gt_difficults):
    """The arguments of ``VOCMeanAP.update`` as numpy arrays, labels, scores and difficult
    flags flattened to (B, N) and (B, M); ValueError (one line) on a fault."""
    pred_boxes, gt_boxes = (boxes_array(name, a) for name, a in (("pred_boxes", pred_boxes),
                                                               ("gt_boxes", gt_boxes)))
    if len(pred_boxes) != len(gt_boxes):
        raise ValueError("VOCMeanAP.update: pred_boxes has %d images, gt_boxes %d: expected "
                         "the same batch" % (len(pred_boxes), len(gt_boxes)))
    pred_labels, pred_scores = (row_array(name, a, pred_boxes, "pred_boxes") for name, a in
                                (("pred_labels", pred_labels), ("pred_scores", pred_scores)))
    gt_labels = row_array("gt_labels", gt_labels, gt_boxes, "gt_boxes")
    gt_difficults = (np.zeros(gt_labels.shape, dtype=bool) if gt_difficults is None else
                     row_array("gt_difficults", gt_difficults, gt_boxes, "gt_boxes"))
    for name, labels in (("pred_labels", pred_labels), ("gt_labels", gt_labels)):
        check_real_rows(name, labels, ~(labels < 0), integer=True)  # NaN is no padding
    pred_kept, gt_kept = pred_labels >= 0, gt_labels >= 0
    check_real_rows("pred_scores", pred_scores, pred_kept)
    check_real_rows("gt_difficults", gt_difficults, gt_kept, integer=True)
    check_real_rows("pred_boxes", pred_boxes, pred_kept)
    check_real_rows("gt_boxes", gt_boxes, gt_kept)
    return pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels, gt_difficults


def boxes_array(name, boxes):
    """``boxes`` as a (B, N, 4) float array; ValueError naming ``name`` otherwise."""
    boxes = to_numpy(boxes)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or not np.issubdtype(boxes.dtype, np.number):
        raise ValueError("VOCMeanAP.update: %s has shape %s and type %s: expected numbers "
                         "of shape (B, N, 4)" % (name, boxes.shape, boxes.dtype))
    return boxes


def row_array(name, values, boxes, boxes_name):
    """``values`` (B, N) or (B, N, 1) as a (B, N) array matching ``boxes`` (B, N, 4)."""
    values = to_numpy(values)
    if values.shape not in (boxes.shape[:2], boxes.shape[:2] + (1,)) or \
            not np.issubdtype(values.dtype, np.number) and values.dtype != bool:
        raise ValueError("VOCMeanAP.update: %s has shape %s and type %s: expected numbers of "
                         "shape %s, one per row of %s" % (name, values.shape, values.dtype,
                                                          boxes.shape[:2], boxes_name))
    return values.reshape(boxes.shape[:2])


def check_real_rows(name, values, kept, integer=False):
    """ValueError if a row that is not padding has a non-finite value, a fractional one
    (``integer``) or, for boxes, x2 < x1 or y2 < y1."""
    real = values[kept].astype(np.float64)
    bad = ~np.isfinite(real)
    if integer:
        bad |= real != np.round(real)
    if real.ndim == 2:  # boxes
        bad = bad.any(axis=1) | (real[:, 2] < real[:, 0]) | (real[:, 3] < real[:, 1])
    if bad.any():
        image, row = np.argwhere(kept)[np.flatnonzero(bad)[0]]
        raise ValueError("VOCMeanAP.update: %s[%d, %d] is %s: expected %s" % (
            name, image, row, as_text(values[image, row]),
            "corners x1 <= x2, y1 <= y2, all finite" if real.ndim == 2 else
            "an integer" if integer else "a finite number"))


def mean_ignoring_nan(values):
    """Mean of the values that are not NaN; NaN (without a warning) if all are."""
    valid = values[~np.isnan(values)]
    return float(valid.mean()) if valid.size else float("nan")


class VOCMeanAP:
    """Per-class AP and their mean over a dataset, accumulated batch by batch.

    ``class_names`` names class ids 0..K-1. ``use_07_metric`` picks the VOC07 11-point
    AP, otherwise the area under the PR curve.

    Box convention: boxes are corners (x1, y1, x2, y2) and widths are
    ``x2 - x1 + pixel_offset`` (heights alike). 1 is for inclusive corners, where x2 is
    the last pixel (Pascal VOC, and GluonCV's metrics, which always add 1); 0 for
    continuous ones, where x2 is one past the last pixel (COCO) or boxes are normalised
    to [0, 1] (model output): with 1, normalised boxes all overlap almost completely
    (``update`` warns then). ``zoo.inference.evaluation.voc_scores`` picks it from the dataset's
    ``box_convention``.

    Matching: in each image, each class's detections are taken by falling score and
    each looks only at the ground truth it overlaps most (greedy, as the VOC devkit).
    Difficult ground truth is neither needed (not a miss) nor a false positive when
    detected. A class without non-difficult ground truth has AP NaN and is left out of
    the mean.

    Tied scores are ordered as GluonCV orders them, made deterministic with a stable
    sort (:func:`by_falling_score`): within one image, tied detections of a class are
    matched to ground truth last-listed first; over the dataset they are ranked later
    image first and, within one image, in listing order (the reverse of their matching
    order). So when two tied detections of one image hit the same object, the later one
    takes it and the earlier duplicate, a false positive, ranks before it. (The VOC
    devkit and pycocotools keep ties in listing order instead; only exact ties differ.)
    """

    def __init__(self, class_names, iou_thresh=0.5, use_07_metric=True, pixel_offset=1):
        self.class_names = checked_class_names(class_names)
        if not (isinstance(iou_thresh, numbers.Real) and 0 < iou_thresh <= 1):
            raise ValueError("VOCMeanAP: iou_thresh=%r: expected a number in (0, 1]"
                             % (iou_thresh,))
        check_pixel_offset(pixel_offset)
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
        ValueError (one line naming the argument) on mismatched shapes, a non-integer
        label, a non-finite box or score, an inverted box (x2 < x1 or y2 < y1) or a class
        id without a name.
        """
        pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels, gt_difficults = \
            checked_batch(pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels,
                          gt_difficults)
        if self.pixel_offset and all_within_unit_square(gt_boxes, gt_labels):
            warnings.warn("VOCMeanAP: ground-truth boxes look normalised to [0, 1] but "
                          "pixel_offset=%g adds that much to every width and height; "
                          "pass pixel_offset=0 for normalised boxes" % self.pixel_offset,
                          stacklevel=2)
        for image in zip(pred_boxes, pred_labels, pred_scores, gt_boxes, gt_labels,
                         gt_difficults):
            self._update_image(*image)

    def _update_image(self, boxes, labels, scores, gt_boxes, gt_labels, gt_difficult):
        """Add one image's detections and ground truth, padding rows included."""
        kept = labels >= 0
        boxes, labels, scores = boxes[kept], labels[kept].astype(int), scores[kept]
        gt_kept = gt_labels >= 0
        gt_boxes, gt_labels = gt_boxes[gt_kept], gt_labels[gt_kept].astype(int)
        gt_difficult = gt_difficult[gt_kept].astype(bool)
        self._check_class_ids(np.concatenate([labels, gt_labels]))
        for class_id in np.unique(np.concatenate([labels, gt_labels])):
            is_class, is_gt_class = labels == class_id, gt_labels == class_id
            order = by_falling_score(scores[is_class])
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
            raise ValueError("VOCMeanAP.update: class id %d out of range: %d class names given"
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
