"""Deployed detectors (an ONNX file, an OpenVINO IR) as the subjects of the jobs that take an
artifact: what ``zoo eval`` scores and ``zoo benchmark`` times, run through the one batch
runner (:class:`zoo.inference.runner.BatchDetector`)."""
from dataclasses import dataclass

from zoo.onnx.deployed import is_deployed, load_deployed_detector

__all__ = ["Deployed", "is_deployed", "load_deployed"]


@dataclass(frozen=True)
class Deployed:
    """A loaded deployed file, in the names jobs read from an artifact."""
    prefix: str                          # the file
    detector: object                     # its zoo.inference.runner.BatchDetector
    epoch: None = None                   # a deployed file does not know its epoch

    @property
    def class_names(self):
        return self.detector.class_names

    @property
    def category_ids(self):
        """Each class's COCO category id, or None (see :class:`zoo.Detections`)."""
        return self.detector.category_ids

    @property
    def precision(self):
        """``{"dtype": "fp32"}``, or an int8 model's with its calibration."""
        return getattr(self.detector, "precision", {"dtype": "fp32"})

    @property
    def runtime(self):
        return "openvino" if self.prefix.endswith(".xml") else "onnxruntime"


def load_deployed(path, threads=None):
    return Deployed(path, load_deployed_detector(path, threads))
