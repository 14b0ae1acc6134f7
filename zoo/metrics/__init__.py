"""Detection metrics: Pascal VOC mean AP and COCO AP (through pycocotools)."""
from .coco import (COCO_STAT_NAMES, category_ap, coco_detections, coco_eval, coco_evaluator,
                   coco_ground_truth)
from .voc import VOCMeanAP

__all__ = ["COCO_STAT_NAMES", "VOCMeanAP", "category_ap", "coco_detections", "coco_eval",
           "coco_evaluator", "coco_ground_truth"]
