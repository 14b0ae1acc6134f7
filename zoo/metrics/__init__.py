"""Detection metrics: Pascal VOC mean AP and COCO AP (through pycocotools). A dataset is
scored by :func:`zoo.inference.evaluation.voc_scores` and
:func:`zoo.inference.evaluation.coco_report`, the one COCO scoring."""
from zoo.metrics.coco import COCO_STAT_NAMES, coco_detections, coco_ground_truth
from zoo.metrics.voc import VOCMeanAP

__all__ = ["COCO_STAT_NAMES", "VOCMeanAP", "coco_detections", "coco_ground_truth"]
