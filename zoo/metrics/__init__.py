"""Detection metrics: Pascal VOC mean AP and COCO AP (through pycocotools)."""
from zoo.metrics.coco import (COCO_STAT_NAMES, category_ap, coco_detections, coco_eval,
                              coco_evaluator, coco_ground_truth)
from zoo.metrics.voc import VOCMeanAP

__all__ = ["COCO_STAT_NAMES", "VOCMeanAP", "category_ap", "coco_detections", "coco_eval",
           "coco_evaluator", "coco_ground_truth"]
