"""COCO box AP through pycocotools, for COCO files and for any dataset turned into one.

Conventions: COCO boxes are ``[x, y, width, height]`` in pixels with
``width = x2 - x1`` (no "+1 pixel"), both for ground truth built here and for
detections converted here. Category ids are class id + 1 unless given.
"""
import contextlib
import copy
import io
import json

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from .arrays import to_numpy

# Names of COCOeval.stats, in order.
COCO_STAT_NAMES = ("AP", "AP50", "AP75", "APs", "APm", "APl",
                   "AR1", "AR10", "AR100", "ARs", "ARm", "ARl")

DIFFICULT_CHOICES = ("iscrowd", "drop", "keep")


def default_category_id(class_id):
    """COCO category id of a 0-based class id when no mapping is given (ids start at 1)."""
    return int(class_id) + 1


def corners_to_xywh(box):
    """``[x1, y1, x2, y2]`` -> ``[x, y, width, height]`` as plain floats."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return [x1, y1, x2 - x1, y2 - y1]


def coco_ground_truth(records, class_names, image_ids=None, difficult="iscrowd"):
    """A COCO ground-truth dict (images, annotations, categories) from generic records.

    Each record has attributes ``width``, ``height``, ``boxes`` (M, 4) pixel
    corners, ``class_ids`` (M,) 0-based (negative rows are padding) and
    ``difficult`` (M,), as ``zoo.data`` records do. ``image_ids`` gives each
    record's COCO image id (default: its index). Category ids are class id + 1.
    ``difficult`` says what difficult boxes become: ``"iscrowd"`` marks them
    crowd, which COCOeval ignores (a detection on one is neither a hit nor a
    false positive; overlap is measured as intersection over the detection's
    area); ``"drop"`` leaves them out (detections on them are false positives);
    ``"keep"`` makes them ordinary boxes. (An ``ignore`` field would not work:
    COCOeval overwrites it with ``iscrowd``.)
    """
    if difficult not in DIFFICULT_CHOICES:
        raise ValueError("difficult=%r: expected one of %s" % (difficult, DIFFICULT_CHOICES))
    records = list(records)
    image_ids = range(len(records)) if image_ids is None else image_ids
    images, annotations = [], []
    for image_id, record in zip(image_ids, records):
        images.append({"id": int(image_id), "width": int(record.width),
                       "height": int(record.height)})
        for box, class_id, is_difficult in zip(to_numpy(record.boxes).reshape(-1, 4),
                                               to_numpy(record.class_ids).reshape(-1),
                                               to_numpy(record.difficult).reshape(-1)):
            if class_id < 0 or (is_difficult and difficult == "drop"):
                continue
            xywh = corners_to_xywh(box)
            annotations.append({
                # COCOeval treats annotation id 0 as "unmatched", so ids start at 1.
                "id": len(annotations) + 1, "image_id": int(image_id),
                "category_id": default_category_id(class_id), "bbox": xywh,
                "area": xywh[2] * xywh[3],
                "iscrowd": int(bool(is_difficult) and difficult == "iscrowd")})
    categories = [{"id": default_category_id(class_id), "name": name}
                  for class_id, name in enumerate(class_names)]
    return {"images": images, "annotations": annotations, "categories": categories}


def coco_detections(image_id, detections, width, height, category_ids=None):
    """COCO result dicts from one image's model output.

    ``detections`` are rows ``[class_id, score, x1, y1, x2, y2]`` with corners
    normalised to [0, 1] (rows with a negative class are skipped); ``width`` and
    ``height`` are the image's size in pixels. ``category_ids[class_id]`` gives the
    COCO category (default class id + 1).
    """
    results = []
    scale = np.array([width, height, width, height], dtype=np.float64)
    for row in to_numpy(detections).reshape(-1, 6):
        if row[0] < 0:
            continue
        class_id = int(row[0])
        category = (default_category_id(class_id) if category_ids is None
                    else int(category_ids[class_id]))
        results.append({"image_id": int(image_id), "category_id": category,
                        "bbox": corners_to_xywh(row[2:6] * scale), "score": float(row[1])})
    return results


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


def plain_detection(detection):
    """A copy of one result dict with JSON-ready Python numbers (pycocotools edits its input)."""
    return {"image_id": int(detection["image_id"]),
            "category_id": int(detection["category_id"]),
            "bbox": [float(v) for v in detection["bbox"]],
            "score": float(detection["score"])}


def load_detections(coco_gt, detections):
    """A results ``COCO`` on the images and categories of ``coco_gt`` (empty results allowed)."""
    unknown = {d["image_id"] for d in detections} - set(coco_gt.getImgIds())
    if unknown:
        raise ValueError("detections on image ids not in the ground truth: %s"
                         % sorted(unknown)[:10])
    if detections:
        return coco_gt.loadRes(detections)
    # loadRes cannot take an empty list; no detections is a valid (all-miss) result.
    return load_ground_truth({"images": coco_gt.dataset["images"],
                              "categories": coco_gt.dataset["categories"],
                              "annotations": []})


def coco_eval(ground_truth, detections, results_json=None, verbose=False):
    """COCO box AP of ``detections`` against ``ground_truth``; returns {stat name: value}.

    ``ground_truth``: COCO JSON path, ground-truth dict (see ``coco_ground_truth``)
    or pycocotools ``COCO``. ``detections``: dicts with ``image_id``,
    ``category_id``, ``bbox`` ``[x, y, w, h]`` in pixels and ``score`` (see
    ``coco_detections``). Every ground-truth image is evaluated, so an image
    without detections counts its boxes as missed. Keys are ``COCO_STAT_NAMES``
    (AP, AP50, AP75, ...); a stat with no ground truth (e.g. no small boxes) is -1,
    as pycocotools reports it. ``results_json`` also writes the detections there in
    the COCO results format. pycocotools' prints are shown only if ``verbose``.
    """
    detections = [plain_detection(d) for d in detections]
    if results_json is not None:
        with open(results_json, "w") as handle:
            json.dump(detections, handle)
    with quiet_unless(verbose):
        coco_gt = load_ground_truth(ground_truth)
        evaluator = COCOeval(coco_gt, load_detections(coco_gt, detections), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return dict(zip(COCO_STAT_NAMES, (float(v) for v in evaluator.stats)))
