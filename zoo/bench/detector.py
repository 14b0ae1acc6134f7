"""Images/s through :class:`zoo.Detector` (JPEG files in, decoding included) against the
pure-inference images/s of the same graph at the same batch size, in one process.

Pure inference is the detector's own :class:`zoo.predictor.Predictor` run on batches
already decoded and preprocessed in memory: the ratio of the two is what decoding,
preprocessing and post-processing cost once they overlap inference. Runs of the two
alternate, and the best of each is reported, so that other load on the machine hurts
neither more than the other.
"""
import glob
import os
from dataclasses import dataclass
from typing import Optional

from zoo.data import embedded
from zoo.inference.detector import Detector, load_detector
from zoo.inference.runner import ImageList
from zoo.bench.timing import seconds
from zoo.errors import OptionsError
from zoo.config.registry import unknown_network
from zoo.model import get_model

__all__ = ["DetectorBenchmarkOptions", "benchmark_detector", "report"]

JPEG_PATTERNS = ("*.jpg", "*.jpeg", "*.JPG", "*.JPEG")


@dataclass(frozen=True)
class DetectorBenchmarkOptions:
    """What to time: a registered ``network`` with random weights at ``data_shape``, or a
    saved ``checkpoint`` (artifact prefix) as saved; on the JPEGs of ``image_dir``, or on
    ``num_images`` of the embedded dataset's images (``image_size`` pixels square),
    generated into ``work_dir`` when no folder is given."""
    network: Optional[str] = "ssd_mobilenetv2_stride8"
    checkpoint: Optional[str] = None
    data_shape: Optional[int] = 192      # None: the config's; ignored for a checkpoint
    image_dir: Optional[str] = None
    num_images: int = 64
    image_size: int = 256
    work_dir: str = os.path.join("output", "benchmark_detector")
    batch_size: int = 8
    runs: int = 10                       # timed passes of each kind; the best is reported
    score_threshold: float = 0.3

    def __post_init__(self):
        if self.checkpoint is None and unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        if min(self.batch_size, self.runs, self.num_images, self.image_size) < 1:
            raise OptionsError("batch_size, runs, num_images and image_size must be at least 1")


def make_detector(options):
    """The detector under test: the checkpoint's, or the network's with random weights."""
    if options.checkpoint is not None:
        return load_detector(options.checkpoint)
    overrides = {} if options.data_shape is None else {"data_shape": options.data_shape}
    model = get_model(options.network, **overrides)
    model.init_params(seed=0)
    return Detector.from_model(model)


def image_paths(options):
    """The JPEG files to detect on: ``image_dir``'s, or freshly generated ones."""
    folder = options.image_dir
    if folder is None:
        root = os.path.join(options.work_dir, "shapes")
        embedded.generate(root, num_train=options.num_images, num_val=0,
                          image_size=options.image_size)
        folder = os.path.join(root, "JPEGImages")
    paths = sorted({path for pattern in JPEG_PATTERNS
                    for path in glob.glob(os.path.join(folder, pattern))})
    if not paths:
        raise OptionsError("%s: no JPEG files (*.jpg, *.jpeg)" % folder)
    return paths


def preprocessed_inputs(detector, paths, batch_size):
    """The graph's inputs for every batch of ``paths``, decoded and preprocessed ahead."""
    return [detector.model.input_arrays(batch.data, batch.im_info)
            for batch in detector.runner.batches(ImageList(paths), batch_size)]


def benchmark_detector(options):
    """Time both ways over the same images and return ``{"detector_images_per_s",
    "inference_images_per_s", "ratio", "num_images", "batch_size", "data_shape",
    "graph"}``."""
    detector = make_detector(options)
    paths = image_paths(options)
    batch_size = min(options.batch_size, len(paths))
    inputs = preprocessed_inputs(detector, paths, batch_size)

    def detect():
        detector(paths, score_threshold=options.score_threshold, batch_size=batch_size)

    def infer():
        for arrays in inputs:
            detector.predictor(**arrays)[0].wait_to_read()

    detect(), infer()  # warm-up: binds the executor, fills MKL-DNN's caches
    detector_times, inference_times = [], []
    for _ in range(options.runs):
        detector_times.append(seconds(detect))
        inference_times.append(seconds(infer))
    detector_speed = len(paths) / min(detector_times)
    inference_speed = len(paths) / min(inference_times)
    return {"detector_images_per_s": detector_speed, "inference_images_per_s": inference_speed,
            "ratio": detector_speed / inference_speed, "num_images": len(paths),
            "batch_size": batch_size, "data_shape": detector.transform.data_shape,
            "graph": options.checkpoint or options.network}


def report(result):
    """The result as the lines the tool prints."""
    return "\n".join([
        "%s at %d pixels, batch %d, %d images:" % (
            result["graph"], result["data_shape"], result["batch_size"], result["num_images"]),
        "  Detector (JPEG files in, decoding included): %8.1f images/s"
        % result["detector_images_per_s"],
        "  pure inference (preprocessed, in memory):    %8.1f images/s"
        % result["inference_images_per_s"],
        "  ratio: %.3f" % result["ratio"]])
