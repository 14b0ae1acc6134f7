"""Running a detector over a dataset and scoring it: VOC07 11-point and area mAP
(:func:`voc_scores`), COCO AP through pycocotools (:func:`coco_report`, the one COCO
scoring of a dataset).

Both metrics measure boxes by the dataset's ``box_convention``
(:mod:`zoo.data.conventions`): inclusive corners (Pascal VOC) are ``x2 - x1 + 1``
pixels wide, continuous ones (COCO) ``x2 - x1``. Detections are read in the same
convention, since the model learnt its boxes from that dataset's ground truth.

Any detector runs over a dataset (:func:`dataset_rows`): :class:`zoo.Detector` or a deployed
one, as :func:`zoo.open_detector` opens them; nothing here loads MXNet.
"""
import numpy as np

from zoo.data.conventions import pixel_offset
from zoo.inference.runner import DatasetImages
from zoo.inference.tiles import detector_outputs
from zoo.metrics import COCO_STAT_NAMES, VOCMeanAP, coco_detections, coco_ground_truth
from zoo.metrics.coco import category_ap, coco_evaluator

__all__ = ["coco_report", "dataset_rows", "in_pixels", "voc_scores"]


def dataset_rows(detector, dataset, batch_size=None, progress=True, tiles=None):
    """Detections for every image of ``dataset``, in order, by any detector
    (:class:`zoo.Detector`, a deployed ONNX or OpenVINO one): a list of ``(N, 6)`` arrays of
    rows ``[class, score, x1, y1, x2, y2]`` normalised to the image, real boxes only (padding
    rows and boxes of no area dropped, the others clipped to the image:
    :func:`zoo.inference.runner.image_rows`).
    The images go through the detector's batch runner
    (:class:`zoo.inference.runner.BatchRunner`, its ``data_threads`` decoding), so the
    detections do not depend on ``batch_size``. ``tiles``: a
    :class:`zoo.inference.tiles.Tiling` to run each image in tiles too."""
    outputs = detector_outputs(detector.runner, DatasetImages(dataset), batch_size, tiles,
                               progress="evaluating" if progress else None)
    return [rows for _, rows, _ in outputs]


def in_pixels(detections, record):
    """Detection rows with boxes scaled from [0, 1] to the record's pixels."""
    scaled = detections.copy()
    scaled[:, 2:6] *= [record.width, record.height, record.width, record.height]
    return scaled


def check_one_per_image(dataset, detections):
    """ValueError unless there is one detection array per image of ``dataset``."""
    if len(detections) != len(dataset.records):
        raise ValueError("%d detection arrays for the %d images of %r: expected one per image"
                         % (len(detections), len(dataset.records), dataset))


def voc_scores(dataset, detections):
    """``{"voc07": {...}, "voc_area": {...}}``: per-class AP and ``mAP`` for each metric.

    ``detections[i]`` are image ``i``'s rows ``[class, score, x1, y1, x2, y2]`` normalised
    to the image (as :func:`dataset_rows` returns them). Boxes are measured by the dataset's
    box convention (+1 pixel for inclusive ones); ties are broken as
    :class:`zoo.metrics.VOCMeanAP` documents (GluonCV's order).
    """
    check_one_per_image(dataset, detections)
    offset = pixel_offset(dataset.box_convention)
    metrics = {"voc07": VOCMeanAP(dataset.class_names, use_07_metric=True,
                                  pixel_offset=offset),
               "voc_area": VOCMeanAP(dataset.class_names, use_07_metric=False,
                                     pixel_offset=offset)}
    for record, found in zip(dataset.records, detections):
        found = in_pixels(found, record)
        inputs = (found[None, :, 2:6], found[None, :, 0], found[None, :, 1],
                  np.asarray(record.boxes, np.float32).reshape(1, -1, 4),
                  np.asarray(record.class_ids).reshape(1, -1),
                  np.asarray(record.difficult).reshape(1, -1))
        for metric in metrics.values():
            metric.update(*inputs)
    return {name: dict(zip(*metric.get())) for name, metric in metrics.items()}


def coco_report(dataset, detections, results_json=None, category_ids=None):
    """``(stats, per-class AP)``: COCO AP, AP50, AP75, ... and ``{class name: AP, "mAP":
    AP}``.

    Detections are as for :func:`voc_scores`. A COCO dataset is scored against its own
    annotation file, and ``results_json`` names its own image and category ids, so
    pycocotools' ``loadRes`` of that file on the annotation file gives these numbers.
    Another dataset becomes COCO ground truth by its box convention (an inclusive box
    ``x1..x2`` is ``x2 - x1 + 1`` wide, so both metrics see the same pixels; difficult
    objects count as crowd regions), images numbered in order, categories
    ``category_ids[class_id]`` (a detector's own, one trained on a COCO file), else class id
    + 1.
    Every detection names its image's file. Ties keep pycocotools' order (listing order).
    """
    check_one_per_image(dataset, detections)
    offset = pixel_offset(dataset.box_convention)
    image_ids, own_ids = dataset.result_ids()
    category_ids = own_ids if dataset.category_ids is not None or category_ids is None \
        else list(category_ids)
    found = []
    for image_id, name, record, rows in zip(image_ids, dataset.file_names(), dataset.records,
                                            detections):
        found.extend(dict(result, file_name=name) for result in coco_detections(
            image_id, rows, record.width, record.height, category_ids, offset))
    evaluator = coco_evaluator(coco_truth(dataset, image_ids, offset, category_ids), found,
                               results_json)
    per_category = category_ap(evaluator)
    stats = dict(zip(COCO_STAT_NAMES, (float(v) for v in evaluator.stats)))
    per_class = {name: per_category[category]
                 for name, category in zip(dataset.class_names, category_ids)}
    return stats, dict(per_class, mAP=stats["AP"])


def coco_truth(dataset, image_ids, offset, category_ids):
    """COCO ground truth of ``dataset``: a COCO file's own, else made from the records,
    class ``k`` as category ``category_ids[k]``."""
    own = dataset.ground_truth()
    return own if own is not None else coco_ground_truth(
        dataset.records, dataset.class_names, image_ids, pixel_offset=offset,
        category_ids=category_ids)
