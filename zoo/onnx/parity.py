"""Whether two detectors find the same objects: the check that an ONNX export detects what
its MXNet graph does.

Two lists of :class:`zoo.inference.detector.Detections` agree when, image by image, their
:data:`TOP` best detections have the same classes in the same order, scores within
``score_tolerance`` and box corners within ``box_tolerance`` of the image's longer side;
detections whose scores are that close may come in either order (:func:`compare`).
"""
from dataclasses import dataclass, field

import numpy as np

from zoo.inference.runner import rgb_image

__all__ = ["BOX_TOLERANCE", "Parity", "TIE_MARGIN", "TOP", "compare", "verify"]

SCORE_TOLERANCE = 1e-4
BOX_TOLERANCE = 1e-3
TOP = 100
TIE_MARGIN = 10
"""Detections compared beyond the ``top``: one tied with the last may rank just after it."""


@dataclass(frozen=True)
class Parity:
    images: int
    detections: int                      # compared, over all images
    max_score_difference: float
    max_box_difference: float            # a fraction of the image's longer side
    mismatches: list = field(default_factory=list)   # one line per image that differs

    @property
    def equal(self):
        return not self.mismatches

    def __str__(self):
        verdict = "equal" if self.equal else "DIFFERENT in %d image%s" % (
            len(self.mismatches), "" if len(self.mismatches) == 1 else "s")
        return ("%s over %d image%s (%d detections): scores within %.2g, boxes within %.2g of "
                "the image side" % (verdict, self.images, "" if self.images == 1 else "s",
                                    self.detections, self.max_score_difference,
                                    self.max_box_difference))


def _counterparts(wanted, found, side, score_tolerance, box_tolerance, count):
    """For each of ``wanted``'s first ``count`` detections, in order, the index of the first
    unused detection of ``found`` of its class with its score and box (None: there is none);
    and the largest score and box differences of those found."""
    used, matches, scores, boxes = set(), [], [0.0], [0.0]
    for label, score, box in zip(wanted.labels[:count], wanted.scores[:count],
                                 wanted.boxes[:count]):
        score_gap = np.abs(found.scores - score)
        box_gap = np.abs(found.boxes - box).max(axis=1, initial=0.0) / side
        near = np.flatnonzero((found.labels == label) & (score_gap <= score_tolerance)
                              & (box_gap <= box_tolerance))
        match = next((int(i) for i in near if i not in used), None)
        matches.append(match)
        if match is not None:
            used.add(match)
            scores.append(float(score_gap[match]))
            boxes.append(float(box_gap[match]))
    return matches, max(scores), max(boxes)


def _image_mismatch(index, expected, actual, side, score_tolerance, box_tolerance, top):
    """``(line or None, score difference, box difference, compared)`` of one image."""
    count = min(top, len(expected))
    if min(top, len(actual)) != count:
        return ("image %d: %d detections against %d" % (index, count, min(top, len(actual))),
                np.inf, np.inf, count)
    scores, boxes = [0.0], [0.0]
    for wanted, found, what in ((expected, actual, "MXNet"), (actual, expected, "ONNX")):
        matches, score_gap, box_gap = _counterparts(wanted, found, side, score_tolerance,
                                                    box_tolerance, count)
        if None in matches:
            first = matches.index(None)
            return ("image %d: %s detection %d (class %d, score %.6f) has no counterpart"
                    % (index, what, first, wanted.labels[first], wanted.scores[first]),
                    np.inf, np.inf, count)
        scores.append(score_gap)
        boxes.append(box_gap)
    return None, max(scores), max(boxes), count


def compare(expected, actual, sizes, score_tolerance=SCORE_TOLERANCE,
            box_tolerance=BOX_TOLERANCE, top=TOP):
    """The :class:`Parity` of two detectors' results on the same images (lists of
    :class:`~zoo.inference.detector.Detections`, best first) of ``sizes`` ``(width, height)``.

    Each of the first ``top`` detections of either must have a counterpart among the other's
    detections, taken in order, of the same class with score and box within the
    tolerances; so the order may differ only between scores within ``score_tolerance``,
    which rounding may rank either way. The lists should hold a few more than ``top``
    detections, for those tied with the last one."""
    mismatches, score_differences, box_differences, compared = [], [0.0], [0.0], 0
    for index, (wanted, found, size) in enumerate(zip(expected, actual, sizes)):
        line, scores, boxes, count = _image_mismatch(index, wanted, found, max(size),
                                                     score_tolerance, box_tolerance, top)
        if line:
            mismatches.append(line)
        score_differences.append(scores)
        box_differences.append(boxes)
        compared += count
    return Parity(images=len(expected), detections=compared,
                  max_score_difference=max(score_differences),
                  max_box_difference=max(box_differences), mismatches=mismatches)


def verify(expected_detector, actual_detector, images, top=TOP):
    """The :class:`Parity` of two detectors (e.g. a :class:`zoo.Detector` and the
    :class:`zoo.onnx.runtime.OnnxDetector` of its export) on ``images`` (paths or arrays),
    comparing each image's ``top`` best detections of any score (:func:`compare`)."""
    # decoded once here, for the sizes and for both detectors
    images = [rgb_image(image, index) for index, image in enumerate(images)]
    sizes = [image.shape[1::-1] for image in images]

    def detect(detector):
        return detector(images, score_threshold=0.0, max_detections=top + TIE_MARGIN)
    return compare(detect(expected_detector), detect(actual_detector), sizes, top=top)
