"""Draw a checkpoint's detections (boxes, class names, scores) on an image, written in the
format the output file's extension names (PNG, JPEG, ...): an artifact's (fp32, int8 or bf16),
or a deployed ``.onnx`` or ``.xml`` file's (:func:`zoo.open_detector`)."""
import os
from dataclasses import dataclass
from typing import Optional

from zoo.errors import OptionsError
from zoo.checkpoint import open_detector
from zoo.inference.runner import SCORE_THRESHOLD
from zoo.inference.visualize import ENCODINGS, draw, save_image

__all__ = ["DemoOptions", "demo"]


@dataclass(frozen=True)
class DemoOptions:
    checkpoint: str                      # artifact prefix (fp32, int8, bf16), .onnx or .xml file
    image: str
    output: str = "detections.png"
    epoch: Optional[int] = None          # None: the best validated epoch, else the newest
    threshold: float = SCORE_THRESHOLD   # lowest score drawn, a detector's default
    exif: str = "apply"                  # "apply": a photo as a viewer shows it; "ignore"

    def __post_init__(self):
        extension = os.path.splitext(self.output)[1]
        if extension.lower() not in ENCODINGS:
            raise OptionsError("output %r: expected a picture file name ending in %s"
                               % (self.output, ", ".join(sorted(ENCODINGS))))


def demo(options):
    """Detect on the image, write the drawing; returns the :class:`zoo.Detections` drawn."""
    detections = open_detector(options.checkpoint, options.epoch, exif=options.exif)(
        options.image, score_threshold=options.threshold)
    os.makedirs(os.path.dirname(os.path.abspath(options.output)), exist_ok=True)
    save_image(options.output, draw(options.image, detections))
    return detections
