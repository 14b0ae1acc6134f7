"""COCO box AP through pycocotools, for COCO files and for any dataset turned into one.

Conventions: COCO boxes are ``[x, y, width, height]`` in pixels, continuous: a box
covers ``[x, x + width)``. Corners are turned into them with
``width = x2 - x1 + pixel_offset``: 0 for continuous corners (COCO's own), 1 for
inclusive ones (Pascal VOC's, where x2 is the last pixel), so that ground truth and
detections of an inclusive dataset are scored on the pixels they cover, as the VOC
metric scores them. :func:`zoo.inference.evaluation.coco_report`, the one COCO scoring of a
dataset, picks the offset from the dataset and runs pycocotools through :func:`coco_evaluator`.
Category ids are class id + 1 unless given.

Tied scores keep pycocotools' order: its stable sorts rank equal scores in the order
the detections are listed (images in id order).
"""
import contextlib
import copy
import io
import json
import math

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from zoo.metrics.arrays import as_text, check_pixel_offset, to_numpy

__all__ = ["COCO_STAT_NAMES", "category_ap", "coco_detections", "coco_evaluator",
           "coco_ground_truth", "corners_to_xywh", "default_category_id"]

# Names of COCOeval.stats, in order.
COCO_STAT_NAMES = ("AP", "AP50", "AP75", "APs", "APm", "APl",
                   "AR1", "AR10", "AR100", "ARs", "ARm", "ARl")

DIFFICULT_CHOICES = ("iscrowd", "drop", "keep")


def default_category_id(class_id):
    """COCO category id of a 0-based class id when no mapping is given (ids start at 1)."""
    return int(class_id) + 1


def category_of(class_id, category_ids=None):
    """The COCO category of class ``class_id``: ``category_ids[class_id]``, else
    :func:`default_category_id`."""
    return (default_category_id(class_id) if category_ids is None
            else int(category_ids[int(class_id)]))


def corners_to_xywh(box, pixel_offset=0):
    """``[x1, y1, x2, y2]`` -> ``[x, y, width, height]`` as plain floats, widths and heights
    ``x2 - x1 + pixel_offset`` (1 for inclusive corners, 0 for continuous ones)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return [x1, y1, x2 - x1 + pixel_offset, y2 - y1 + pixel_offset]


def record_rows(index, record, num_classes):
    """A record's boxes (M, 4), class ids (M,) and difficult flags (M,) as numpy arrays;
    ValueError naming record ``index`` if their lengths differ or a class id has no name."""
    boxes = to_numpy(record.boxes).reshape(-1, 4)
    class_ids, difficult = (to_numpy(a).reshape(-1) for a in (record.class_ids,
                                                              record.difficult))
    if not len(boxes) == len(class_ids) == len(difficult):
        raise ValueError("record %d: %d boxes, %d class ids and %d difficult flags: expected "
                         "one of each per object" % (index, len(boxes), len(class_ids),
                                                     len(difficult)))
    unknown = class_ids[class_ids >= num_classes]
    if unknown.size:
        raise ValueError("record %d: class id %s out of range: %d class names given"
                         % (index, unknown[0], num_classes))
    return boxes, class_ids, difficult


def coco_ground_truth(records, class_names, image_ids=None, difficult="iscrowd",
                      pixel_offset=0, category_ids=None):
    """A COCO ground-truth dict (images, annotations, categories) from generic records.

    Each record has attributes ``width``, ``height``, ``boxes`` (M, 4) pixel
    corners, ``class_ids`` (M,) 0-based (negative rows are padding) and
    ``difficult`` (M,), as ``zoo.data`` records do. ``image_ids`` gives each
    record's COCO image id (default: its index). ``category_ids[class_id]`` is a class's
    COCO category (default class id + 1).
    ``difficult`` says what difficult boxes become: ``"iscrowd"`` marks them
    crowd, which COCOeval ignores (a detection on one is neither a hit nor a
    false positive; overlap is measured as intersection over the detection's
    area); ``"drop"`` leaves them out (detections on them are false positives);
    ``"keep"`` makes them ordinary boxes. (An ``ignore`` field would not work:
    COCOeval overwrites it with ``iscrowd``.) ``pixel_offset``: 1 if the records'
    corners are inclusive (see the module's conventions).
    """
    if difficult not in DIFFICULT_CHOICES:
        raise ValueError("difficult=%r: expected one of %s" % (difficult, DIFFICULT_CHOICES))
    check_pixel_offset(pixel_offset)
    records = list(records)
    image_ids = range(len(records)) if image_ids is None else list(image_ids)
    if len(image_ids) != len(records):
        raise ValueError("%d image ids for %d records: expected one per record"
                         % (len(image_ids), len(records)))
    images, annotations = [], []
    for index, (image_id, record) in enumerate(zip(image_ids, records)):
        images.append({"id": int(image_id), "width": int(record.width),
                       "height": int(record.height)})
        for box, class_id, is_difficult in zip(*record_rows(index, record, len(class_names))):
            if class_id < 0 or (is_difficult and difficult == "drop"):
                continue
            xywh = corners_to_xywh(box, pixel_offset)
            annotations.append({
                # COCOeval treats annotation id 0 as "unmatched", so ids start at 1.
                "id": len(annotations) + 1, "image_id": int(image_id),
                "category_id": category_of(class_id, category_ids), "bbox": xywh,
                "area": xywh[2] * xywh[3],
                "iscrowd": int(bool(is_difficult) and difficult == "iscrowd")})
    categories = [{"id": category_of(class_id, category_ids), "name": name}
                  for class_id, name in enumerate(class_names)]
    return {"images": images, "annotations": annotations, "categories": categories}


def coco_detections(image_id, detections, width, height, category_ids=None, pixel_offset=0):
    """COCO result dicts from one image's model output.

    ``detections`` are rows ``[class_id, score, x1, y1, x2, y2]`` with corners
    normalised to [0, 1] (rows with a negative class are skipped); ``width`` and
    ``height`` are the image's size in pixels. ``category_ids[class_id]`` gives the
    COCO category (default class id + 1). ``pixel_offset``: 1 if the corners, once
    in pixels, are inclusive (a model trained on inclusive ground truth predicts
    inclusive corners). ValueError (one line) on a malformed row.
    """
    check_pixel_offset(pixel_offset)
    rows = to_numpy(detections)
    if rows.ndim != 2 or rows.shape[1] != 6:
        raise ValueError("image %s: detections have shape %s: expected (N, 6) rows "
                         "[class_id, score, x1, y1, x2, y2]" % (image_id, rows.shape))
    results = []
    scale = np.array([width, height, width, height], dtype=np.float64)
    for row in rows:
        if row[0] < 0:
            continue
        check_detection_row(image_id, row, category_ids)
        results.append({"image_id": int(image_id),
                        "category_id": category_of(row[0], category_ids),
                        "bbox": corners_to_xywh(row[2:6] * scale, pixel_offset),
                        "score": float(row[1])})
    return results


def check_detection_row(image_id, row, category_ids):
    """ValueError naming the image if a detection row is not a usable detection."""
    class_id, score, x1, y1, x2, y2 = (float(v) for v in row)
    if not all(map(math.isfinite, (class_id, score, x1, y1, x2, y2))):
        problem = "has a non-finite value"
    elif class_id != int(class_id) or (category_ids is not None
                                       and class_id >= len(category_ids)):
        problem = "class id %g has no category" % class_id
    elif x2 < x1 or y2 < y1:
        problem = "is an inverted box (need x1 <= x2, y1 <= y2)"
    else:
        return
    raise ValueError("image %s: detection %s %s" % (image_id, as_text(row), problem))


def quiet_unless(verbose):
    """Context that swallows pycocotools' prints to stdout unless ``verbose``."""
    return contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO())


def load_ground_truth(ground_truth):
    """A pycocotools ``COCO`` from a COCO JSON path, a ground-truth dict or a ``COCO``."""
    if isinstance(ground_truth, COCO):
        return ground_truth
    if isinstance(ground_truth, dict):
        coco = COCO()
        coco.dataset = copy.deepcopy(ground_truth)  # COCOeval adds fields to the annotations
        coco.createIndex()
        return coco
    return COCO(str(ground_truth))


def plain_detection(index, detection):
    """A copy of result dict number ``index`` with JSON-ready Python numbers (pycocotools
    edits its input); ValueError (one line) if a field is missing or malformed."""
    try:
        plain = {"image_id": int(detection["image_id"]),
                 "category_id": int(detection["category_id"]),
                 "bbox": [float(v) for v in detection["bbox"]],
                 "score": float(detection["score"])}
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError("detection %d: %s: expected image_id, category_id, bbox [x, y, w, h] "
                         "and score numbers (%s: %s)" % (index, str(detection)[:120],
                                                         type(err).__name__, err))
    if "file_name" in detection:  # loadRes keeps extra fields; they name the image to a reader
        plain["file_name"] = str(detection["file_name"])
    x, y, width, height = plain["bbox"] if len(plain["bbox"]) == 4 else [math.nan] * 4
    if not all(map(math.isfinite, (x, y, width, height, plain["score"]))) or \
            width < 0 or height < 0:
        raise ValueError("detection %d: bbox %s, score %s: expected 4 finite numbers "
                         "[x, y, w, h] with w, h >= 0 and a finite score"
                         % (index, plain["bbox"], plain["score"]))
    return plain


def load_detections(coco_gt, detections):
    """A results ``COCO`` on the images and categories of ``coco_gt`` (empty results allowed)."""
    unknown = {d["image_id"] for d in detections} - set(coco_gt.getImgIds())
    if unknown:
        raise ValueError("detections on image ids not in the ground truth: %s"
                         % sorted(unknown)[:10])
    # COCOeval scores only the ground truth's categories: others would vanish unscored.
    unknown = {d["category_id"] for d in detections} - set(coco_gt.getCatIds())
    if unknown:
        raise ValueError("detections of category ids not in the ground truth: %s"
                         % sorted(unknown)[:10])
    if detections:
        return coco_gt.loadRes(detections)
    # loadRes cannot take an empty list; no detections is a valid (all-miss) result.
    return load_ground_truth({"images": coco_gt.dataset["images"],
                              "categories": coco_gt.dataset["categories"],
                              "annotations": []})


def category_ap(evaluator):
    """``{category id: AP}`` of a run :func:`coco_evaluator`: AP at IoU .50:.95 over every
    area with 100 detections per image, as the ``AP`` stat but per category (-1 for one
    without ground truth, as pycocotools reports an empty stat)."""
    precision = evaluator.eval["precision"]  # [IoU, recall, category, area, max dets]
    scores = {}
    for index, category in enumerate(evaluator.params.catIds):
        values = precision[:, :, index, 0, -1]
        values = values[values > -1]
        scores[int(category)] = float(values.mean()) if values.size else -1.0
    return scores


def coco_evaluator(ground_truth, detections, results_json=None, verbose=False):
    """pycocotools' ``COCOeval`` of ``detections`` against ``ground_truth``, evaluated,
    accumulated and summarised (``stats``, ``eval``): the step of
    :func:`zoo.inference.evaluation.coco_report` that runs pycocotools, which scores a
    dataset (call that one).

    ``ground_truth``: COCO JSON path, ground-truth dict (see ``coco_ground_truth``)
    or pycocotools ``COCO``. ``detections``: dicts with ``image_id``,
    ``category_id``, ``bbox`` ``[x, y, w, h]`` in pixels and ``score`` (see
    ``coco_detections``). Every ground-truth image is evaluated, so an image
    without detections counts its boxes as missed. Its ``stats`` are
    ``COCO_STAT_NAMES`` (AP, AP50, AP75, ...); a stat with no ground truth (e.g. no small
    boxes) is -1, as pycocotools reports it. ``results_json`` also writes the detections
    there in the COCO results format (a detection's ``file_name``, if it has one, too).
    pycocotools' prints are shown only if ``verbose``.
    """
    detections = [plain_detection(index, d) for index, d in enumerate(detections)]
    if results_json is not None:
        with open(results_json, "w") as handle:
            json.dump(detections, handle)
    with quiet_unless(verbose):
        coco_gt = load_ground_truth(ground_truth)
        evaluator = COCOeval(coco_gt, load_detections(coco_gt, detections), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return evaluator
