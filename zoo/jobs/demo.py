"""Draw a checkpoint's detections (boxes, class names, scores) on an image, written in the
format the output file's extension names (PNG, JPEG, ...): an artifact's (fp32, int8 or bf16),
or a deployed ``.onnx`` or ``.xml`` file's (:func:`zoo.open_detector`)."""
import os
from dataclasses import dataclass
from typing import Optional

from zoo.errors import OptionsError
from zoo.flags import (ARTIFACT_OR_DEPLOYED, REQUIRED, checkpoint_flag, epoch_flag, exif_flag,
                       flag, fraction, options_from)
from zoo.checkpoint import open_detector
from zoo.inference.runner import SCORE_THRESHOLD
from zoo.inference.visualize import ENCODINGS, draw, save_image

__all__ = ["DemoOptions", "demo"]


@dataclass(frozen=True)
class DemoOptions:
    """What ``zoo demo`` draws: each field declares its flag (:mod:`zoo.flags`)."""
    checkpoint: str = checkpoint_flag(ARTIFACT_OR_DEPLOYED)
    image: str = flag(REQUIRED, "image file (JPEG or PNG)")
    output: str = flag("detections.png", "picture to write, encoded as its extension says "
                                         "(.png, .jpg, ...)")
    epoch: Optional[int] = epoch_flag()  # None: the best validated epoch, else the newest
    threshold: float = flag(SCORE_THRESHOLD, "lowest score drawn",  # a detector's default
                            type=fraction)
    exif: str = exif_flag()              # "apply": a photo as a viewer shows it; "ignore"

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo demo``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

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
