"""Deployed detectors (an ONNX file, an OpenVINO IR) as the subjects of the jobs that take an
artifact: what ``zoo eval`` scores and ``zoo benchmark`` times, run through the one batch
runner (:class:`zoo.inference.BatchDetector`)."""
from dataclasses import dataclass

from ..onnx.deployed import is_deployed, load_deployed_detector

__all__ = ["Deployed", "is_deployed", "load_deployed", "predict_deployed"]


@dataclass(frozen=True)
class Deployed:
    """A loaded deployed file, in the names jobs read from an artifact."""
    prefix: str                          # the file
    detector: object                     # its zoo.inference.BatchDetector
    epoch: None = None                   # a deployed file does not know its epoch

    @property
    def class_names(self):
        return self.detector.class_names

    @property
    def precision(self):
        """``{"dtype": "fp32"}``, or an int8 model's with its calibration."""
        return getattr(self.detector, "precision", {"dtype": "fp32"})

    @property
    def runtime(self):
        return "openvino" if self.prefix.endswith(".xml") else "onnxruntime"


def load_deployed(path, threads=None):
    return Deployed(path, load_deployed_detector(path, threads))


def predict_deployed(detector, dataset, batch_size=8, progress=True):
    """What :func:`zoo.evaluation.predict` gives for an artifact: every image's ``(N, 6)``
    rows ``[class, score, x1, y1, x2, y2]`` normalised to the image, empty rows removed."""
    images = DatasetImages(dataset)
    batches = detector.run(images, max(1, min(batch_size, len(images))))
    if progress:
        from tqdm import tqdm
        batches = tqdm(batches, total=-(-len(images) // batch_size), desc="evaluating",
                       unit="batch")
    return [found[found[:, 0] >= 0] for rows, _ in batches for found in rows]


class DatasetImages:
    """The dataset's images as the detector takes them: file paths, decoded by its workers;
    images inside a record file are decoded here."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset.image_path(index) or self.dataset[index][0]
