"""Draw an artifact's detections (boxes, class names, scores) on an image, as PNG."""
import os
from dataclasses import dataclass
from typing import Optional

from zoo.inference.detector import load_detector
from zoo.inference.visualize import draw, save_png

__all__ = ["DemoOptions", "demo"]


@dataclass(frozen=True)
class DemoOptions:
    checkpoint: str
    image: str
    output: str = "detections.png"
    epoch: Optional[int] = None          # None: the best validated epoch, else the newest
    threshold: float = 0.5               # lowest score drawn
    exif: str = "apply"                  # "apply": a photo as a viewer shows it; "ignore"


def demo(options):
    """Detect on the image, write the drawing; returns the :class:`zoo.Detections` drawn."""
    detections = load_detector(options.checkpoint, options.epoch, exif=options.exif)(
        options.image, score_threshold=options.threshold)
    os.makedirs(os.path.dirname(os.path.abspath(options.output)), exist_ok=True)
    save_png(options.output, draw(options.image, detections))
    return detections
