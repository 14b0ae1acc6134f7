"""Detection metrics: Pascal VOC mean AP and COCO AP (through pycocotools)."""
from zoo.metrics.coco import COCO_STAT_NAMES, coco_detections, coco_eval, coco_ground_truth
from zoo.metrics.voc import VOCMeanAP

__all__ = ["COCO_STAT_NAMES", "VOCMeanAP", "coco_detections", "coco_eval", "coco_ground_truth"]
