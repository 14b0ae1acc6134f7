"""What the ``zoo benchmark*`` commands time, as options: ``zoo benchmark``'s a registered
network, an artifact (on MXNet, :mod:`zoo_bench.inference`) or a deployed ``.onnx``/``.xml``
file (on its own runtime, :mod:`zoo_bench.deployed`); then those of the data pipeline, the
detector, memory saving, calibration and the training step, beside the modules that time
them. Loads no MXNet, so that a deployment without it can time its files, and every
benchmark's ``--help`` answers without loading it."""
import argparse
import os
import shlex
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo.choices import CALIB_MODES, COLLECTORS, TRAIN_DTYPES
from zoo.config.registry import get_config, list_models, unknown_network
from zoo.data.factory import KINDS
from zoo.errors import OptionsError
from zoo.flags import (annotations_flag, batch_size_flag, comma_list, data_root_flag,
                       data_shape_flag, data_threads_flag, dataset_flag, epoch_flag,
                       field_of, flag, float_in, fraction, image_dir_flag, max_size_flag,
                       nonnegative_int, options_from, positive_float, positive_int,
                       progress_flag, skip_bad_flag)
from zoo.inference.runner import SCORE_THRESHOLD
from zoo.inference.tiles import DEFAULT_OVERLAP
from zoo.jobs.quickstart import trained_prefix
from zoo.jobs.serve import ServeOptions
from zoo.onnx.deployed import is_deployed

__all__ = ["BUSY_CORES", "BenchmarkOptions", "COMPARISONS", "CONFIGURATIONS",
           "CalibrationBenchmarkOptions", "ClusterBenchmarkOptions", "DATA_COMPARISONS",
           "DTYPES", "DataBenchmarkOptions",
           "DecodeBenchmarkOptions", "FIXED_PHOTOS",
           "PHOTO_ISAS", "PHOTO_SUBJECTS", "PhotosBenchmarkOptions", "image_size",
           "DetectorBenchmarkOptions", "GLUONCV_RECIPES", "MemoryBenchmarkOptions",
           "PARITY_ARCHITECTURES", "ParityBenchmarkOptions", "ServeBenchmarkOptions",
           "SmallObjectsBenchmarkOptions", "TilesBenchmarkOptions", "TrainBenchmarkOptions"]

DTYPES = ("fp32", "int8", "bf16")
COMPARISONS = ("gluoncv", "onnxruntime", "openvino", "all")


def dtype(value):
    """One of :data:`DTYPES` (``--dtypes``' items)."""
    if value not in DTYPES:
        raise argparse.ArgumentTypeError("one of %s, got %r" % (", ".join(DTYPES), value))
    return value


def train_dtype(value):
    """One of ``zoo train --dtype``'s (``zoo benchmark-train --dtypes``' items)."""
    if value not in TRAIN_DTYPES:
        raise argparse.ArgumentTypeError("one of %s, got %r" % (", ".join(TRAIN_DTYPES), value))
    return value


def image_size(text):
    """``WIDTHxHEIGHT`` as ``(width, height)``."""
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ValueError("expected WIDTHxHEIGHT, e.g. 4000x3000") from None
    return width, height


image_size.text = lambda size: "%dx%d" % size  # a default as --help shows it


def network_flag(default, help="registered model: %s"):
    """``--network NAME``, one of the registered models (``help`` names them at ``%s``)."""
    return flag(default, help % ", ".join(list_models()), choices=list_models(),
                metavar="NAME")


@dataclass(frozen=True)
class BenchmarkOptions:
    """What to time: a registered ``network`` (built fresh, in each of ``dtypes``) or a saved
    ``checkpoint`` (run as saved, with its own graph, parameters and data shape: an artifact
    prefix on MXNet, or a deployed ``.onnx``/``.xml`` file alone on its runtime)."""
    network: Optional[str] = network_flag(None, "registered model, built with fresh "
                                                "parameters: %s")
    checkpoint: Optional[str] = flag(
        None, "artifact prefix (fp32, int8 or bf16), run with its own graph, parameters and "
              "data shape; or a deployed .onnx or .xml file, timed alone on ONNX Runtime or "
              "OpenVINO (no MXNet needed)", metavar="PREFIX")
    epoch: Optional[int] = epoch_flag()  # of the checkpoint; None: its best, else newest
    data_shape: Optional[int] = data_shape_flag(max_size=True, of_network=True)
    max_size: Optional[int] = max_size_flag(of_network=True)  # a Faster R-CNN's long side
    dtypes: Tuple[str, ...] = flag(
        ("fp32",), "comma-separated, of --network: %s (int8: naive calibration on the "
                   "benchmark input, for speed only; bf16: the graph converted by MXNet's AMP, "
                   "timed converted-then-fused and fused-then-converted, on CPUs with "
                   "avx512_bf16 or amx_bf16)" % ", ".join(DTYPES), type=comma_list(dtype))
    batch_sizes: Tuple[int, ...] = flag((1,), "comma-separated batch sizes",
                                        type=comma_list(positive_int))
    runs: int = flag(5, "timed runs (the median is reported)", type=positive_int)
    warmup: int = flag(2, "untimed runs first", type=nonnegative_int)
    compare: Optional[str] = flag(
        None, "gluoncv: also time the closest GluonCV models (randomly initialised, on the "
              "same input); onnxruntime, openvino: also time our fp32 graph exported to ONNX "
              "on that runtime (OpenVINO in fp32); all: MXNet, ONNX Runtime fp32 and OpenVINO "
              "fp32 and int8 (each deployed one in its own process) beside GluonCV's fp32 and "
              "int8 (quantize_net), naming the fastest of ours", choices=COMPARISONS)
    num_classes: int = flag(20, "classes of --network (VOC's 20, as GluonCV's models)",
                            type=positive_int)
    plot: Optional[str] = flag(None, "plot images/s against batch size into this file",
                               metavar="PNG")
    profile: bool = flag(False, "also time each part of our graphs (backbone, FPN, RPN head, "
                                "proposals, ROIAlign, box head, NMS) at the first batch size")
    # compare all on a trained checkpoint: also score each deployment on this dataset split
    # (zoo_bench.accuracy), its int8 calibrated on the first calib_images of calib_split
    data_root: Optional[str] = flag(None, "dataset folder to score on")
    dataset: str = flag("voc", "its format", choices=KINDS)
    split: str = flag("val", "split to score on")
    calib_split: str = flag(             # not the scored split: no image scored calibrates
        "train", "split the int8 model is calibrated on (not the scored one)")
    annotations: Optional[str] = annotations_flag()
    image_dir: Optional[str] = image_dir_flag()
    calib_images: int = flag(32, "first images of --calib-split calibrated on",
                             type=positive_int)

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if (self.network is None) == (self.checkpoint is None):
            raise OptionsError("give either a network or a checkpoint, not %s"
                               % ("both" if self.network else "neither"))
        if self.network is not None and unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        if not self.dtypes or set(self.dtypes) - set(DTYPES):
            raise OptionsError("dtypes must be a non-empty subset of %s, got %s"
                               % (", ".join(DTYPES), ",".join(self.dtypes)))
        if "bf16" in self.dtypes:
            from zoo.engine.precision import check_dtype  # MXNet: only for bf16
            check_dtype("bf16", flag="--dtypes")
        if not self.batch_sizes or min(self.batch_sizes) < 1 or self.runs < 1:
            raise OptionsError("batch sizes and runs must be at least 1")
        if self.warmup < 0:
            raise OptionsError("warmup must be >= 0, got %d" % self.warmup)
        if self.compare not in (None,) + COMPARISONS:
            raise OptionsError("compare must be one of %s, got %r"
                               % (", ".join(COMPARISONS), self.compare))
        if self.checkpoint and (self.data_shape or self.max_size
                                or tuple(self.dtypes) != ("fp32",)):
            raise OptionsError("a checkpoint runs as saved: no data shape, max size or dtypes "
                               "with it")
        if self.data_root and (self.compare != "all" or not self.checkpoint):
            raise OptionsError("a dataset scores each deployment of a trained model: give "
                               "it with --checkpoint and --compare all")
        if self.calib_images < 1:
            raise OptionsError("calib_images must be at least 1, got %d" % self.calib_images)
        self._check_deployed()

    @property
    def deployed(self):
        """Whether the checkpoint is a deployed file, timed alone on its runtime."""
        return self.checkpoint is not None and is_deployed(self.checkpoint)

    def _check_deployed(self):
        """A deployed file is timed as it is, on its own runtime: what compares or profiles
        MXNet graphs does not apply to it."""
        given = [flag for flag, value in (("--epoch", self.epoch is not None),
                                          ("--compare", self.compare),
                                          ("--profile", self.profile),
                                          ("--plot", self.plot)) if value]
        if self.deployed and given:
            raise OptionsError("%s: a deployed file is timed alone on its runtime: no %s with "
                               "it (time its artifact for those)"
                               % (self.checkpoint, " or ".join(given)))

    def data_split(self, split=None):
        """The :class:`zoo.jobs.datasets.DataSplit` accuracy is measured on (or ``split`` of
        the same dataset), or None without a dataset."""
        from zoo.jobs.datasets import DataSplit
        if not self.data_root:
            return None
        return DataSplit(self.dataset, self.data_root, split or self.split,
                         annotations=self.annotations, image_dir=self.image_dir)


@dataclass(frozen=True)
class DecodeBenchmarkOptions:
    images: Tuple[str, ...] = flag(      # JPEG files; none: num_images generated
        (), "photos to decode (default: generated ones)", nargs="+", metavar="JPEG")
    num_images: int = flag(8, "photos generated without --images, every other one turned by "
                              "EXIF", type=positive_int)
    image_size: Tuple[int, int] = flag(  # generated: (width, height)
        (4000, 3000), "size of the generated photos", type=image_size, metavar="WxH")
    output_dir: str = flag(os.path.join("output", "benchmark_decode"),
                           "folder the generated photos are kept in")
    # decoded for a Faster R-CNN input: short side and long-side limit
    data_shape: int = data_shape_flag(600, max_size=True)
    max_size: int = max_size_flag(1000)
    seed: int = flag(0, "seed of the generated photos", type=int)

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-decode``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if min(self.num_images, self.data_shape, self.max_size, *self.image_size) < 1:
            raise OptionsError("num_images, data_shape, max_size and image_size must be at "
                               "least 1")
        missing = [path for path in self.images if not os.path.isfile(path)]
        if missing:
            raise OptionsError("image %s: no such file" % missing[0])


DATA_COMPARISONS = ("gluoncv",)
"""What ``zoo benchmark-data`` times ours beside."""


@dataclass(frozen=True)
class DataBenchmarkOptions:
    dataset: str = dataset_flag("embedded")
    data_root: Optional[str] = data_root_flag(None)  # embedded: output/shapes_<image_size>
    split: str = flag("train", "split to read")
    skip_bad: bool = skip_bad_flag()
    annotations: Optional[str] = annotations_flag()
    image_dir: Optional[str] = image_dir_flag()
    image_size: int = flag(448, "embedded only: side of the generated square JPEGs; 448x448 is "
                                "about the area of a 500x375 VOC image", type=positive_int)
    num_images: int = flag(64, "embedded only: images generated; batches cycle over them",
                           type=positive_int)
    data_shape: int = data_shape_flag(512)
    batch_size: int = batch_size_flag(32)
    # threads for ours, processes for GluonCV; None: the cores
    data_threads: Optional[int] = data_threads_flag()
    batches: Optional[int] = flag(       # timed batches per side; None: 5 per worker
        None, "timed batches per side (default: 5 per worker; GluonCV's workers each make "
              "whole batches, so a multiple of the workers times them evenly)",
        type=positive_int)
    warmup: Optional[int] = flag(        # untimed batches first; None: one per worker
        None, "untimed batches first, per side (default: one per worker, so both pipelines "
              "are full when the clock starts)", type=nonnegative_int)
    seed: int = flag(0, None, type=nonnegative_int)
    opencv_threads: Optional[int] = flag(  # cv2.setNumThreads for our side; None: OpenCV's
        None, "cv2.setNumThreads for our side (GluonCV's workers use MXNet's own OpenCV; "
              "default: OpenCV's, one per core)", type=positive_int)
    compare: Optional[str] = flag(       # or None: ours only (the flag's "none")
        "gluoncv", "'none': time ours only", choices=DATA_COMPARISONS + ("none",))

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-data``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if self.dataset not in KINDS:
            raise OptionsError("unknown dataset kind %r; known: %s"
                             % (self.dataset, ", ".join(KINDS)))
        if self.dataset != "embedded" and self.data_root is None:
            raise OptionsError("a data root is needed for dataset %s" % self.dataset)
        if self.compare not in (None,) + DATA_COMPARISONS:
            raise OptionsError("compare must be one of %s or None, got %r"
                             % (", ".join(DATA_COMPARISONS), self.compare))
        for name in ("image_size", "num_images", "data_shape", "batch_size", "data_threads",
                     "batches"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise OptionsError("%s must be >= 1, got %d" % (name, value))
        if self.warmup is not None and self.warmup < 0:
            raise OptionsError("warmup must be >= 0, got %d" % self.warmup)

    @property
    def workers(self):
        return self.data_threads or len(os.sched_getaffinity(0))

    @property
    def timed_batches(self):
        return 5 * self.workers if self.batches is None else self.batches

    @property
    def warmup_batches(self):
        # one batch per worker by default, so both pipelines are full when the clock starts
        return self.workers if self.warmup is None else self.warmup


BUSY_CORES = 2
"""The cores :func:`zoo_bench.detector.busy_detect` runs ``zoo detect`` and the busy processes
on."""


@dataclass(frozen=True)
class DetectorBenchmarkOptions:
    """What to time: a registered ``network`` with random weights at ``data_shape``, or a
    saved ``checkpoint`` (artifact prefix) as saved; on the images of ``image_dir``, or on
    ``num_images`` of the embedded dataset's images (``image_size`` pixels square),
    generated into ``work_dir`` when no folder is given."""
    network: Optional[str] = network_flag("ssd_mobilenetv2_stride8",
                                          "registered model with random weights: %s")
    checkpoint: Optional[str] = flag(None, "artifact prefix, run as saved", metavar="PREFIX")
    # None: the config's; ignored for a checkpoint
    data_shape: Optional[int] = data_shape_flag(192, of_network=True)
    image_dir: Optional[str] = flag(
        None, "folder of images, any format the zoo reads (JPEG, PNG, BMP, TIFF, WebP); other "
              "files are skipped and named (default: generate --num-images into --work-dir)",
        name="--images")
    num_images: int = flag(64, "images to generate", type=positive_int)
    image_size: int = flag(256, "side of the generated images", type=positive_int)
    work_dir: str = flag(os.path.join("output", "benchmark_detector"), "where to generate them")
    batch_size: int = batch_size_flag(8)
    runs: int = flag(10, "timed passes of each kind; the best is reported", type=positive_int)
    # --threshold as zoo detect and demo name it; --score-threshold, its old name, still works
    score_threshold: float = flag(SCORE_THRESHOLD, "lowest score kept",  # a detector's
                                  name=("--threshold", "--score-threshold"), type=fraction,
                                  metavar="THRESHOLD")
    mixed_orientations: bool = flag(     # generate portrait and landscape images instead
        False, "generate portrait and landscape JPEGs of several aspect ratios (--image-size "
               "on the long side) instead of square ones")
    batch_sizes: Optional[Tuple[int, ...]] = flag(  # a sweep instead of one timing
        None, "time seconds per image at each of these batch sizes instead (e.g. 1,2,8)",
        type=comma_list(positive_int), metavar="N,...")
    busy: Optional[int] = flag(          # the zoo detect command, quiet and busy, instead
        None, "time the zoo detect command on %d cores, quiet and beside N CPU-bound "
              "processes on the same cores, instead (e.g. 4)" % BUSY_CORES,
        type=positive_int, metavar="N")

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-detector``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if self.checkpoint is None and unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        if min(self.batch_size, self.runs, self.num_images, self.image_size) < 1:
            raise OptionsError("batch_size, runs, num_images and image_size must be at least 1")


@dataclass(frozen=True)
class ServeBenchmarkOptions:
    """What ``zoo benchmark-serve`` times: a registered ``network`` with random weights at
    ``data_shape`` (an artifact written into ``work_dir``), or a saved ``checkpoint``
    (artifact, ``.onnx`` or ``.xml``), served by ``zoo serve`` on loopback and called
    in-process, on ``num_images`` generated JPEG photos of ``image_size``."""
    network: Optional[str] = network_flag("ssd_mobilenetv2_stride8",
                                          "registered model with random weights: %s")
    checkpoint: Optional[str] = flag(None, "artifact prefix, .onnx or .xml file, served as "
                                           "saved", metavar="PREFIX")
    data_shape: Optional[int] = data_shape_flag(192, of_network=True)  # ignored: checkpoint
    num_images: int = flag(8, "photos to generate (requests cycle over them)",
                           type=positive_int)
    image_size: Tuple[int, int] = flag((640, 480), "size of the generated photos",
                                       type=image_size, metavar="WxH")
    work_dir: str = flag(os.path.join("output", "benchmark_serve"),
                         "where the network's artifact is written")
    clients: Tuple[int, ...] = flag((1, 4, 16), "concurrent clients, comma-separated",
                                    type=comma_list(positive_int), metavar="N,...")
    requests: int = flag(64, "timed requests at each number of clients (after as many "
                             "untimed ones as the most clients)", type=positive_int)
    replicas: int = field_of(ServeOptions, "replicas")
    max_batch_size: Optional[int] = field_of(ServeOptions, "max_batch_size")
    batch_wait: float = field_of(ServeOptions, "batch_wait")
    port: int = flag(8765, "loopback port the server listens on", type=positive_int)
    seed: int = flag(0, "seed of the generated photos", type=int)

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-serve``'s parsed flags, those of ``values``
        given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if self.checkpoint is None and unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        if min(self.num_images, self.requests, *self.clients, *self.image_size) < 1:
            raise OptionsError("num_images, requests, clients and image_size must be at "
                               "least 1")


CONFIGURATIONS = {
    "plain": {},
    "mxnet-mirror": {"MXNET_BACKWARD_DO_MIRROR": "1"},
    "memory-saving": {},
}
"""The configurations ``zoo benchmark-memory`` measures, each with the environment its
process runs in (see :mod:`zoo_bench.memory`)."""


@dataclass(frozen=True)
class MemoryBenchmarkOptions:
    network: str = network_flag("ssd_resnet101")
    data_shape: Optional[int] = data_shape_flag()  # None: the config's
    batch_size: int = batch_size_flag(8)  # images per training step
    steps: int = flag(3, "timed steps (the median is reported)", type=positive_int)
    warmup: int = flag(1, "untimed steps first", type=nonnegative_int)
    configurations: Tuple[str, ...] = flag(
        tuple(CONFIGURATIONS), "comma-separated, plain included: plain (the training graph as "
                               "it is), mxnet-mirror (MXNET_BACKWARD_DO_MIRROR=1), "
                               "memory-saving (what `zoo train --memory-saving` binds)",
        type=comma_list(str))

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-memory``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        unknown = set(self.configurations) - set(CONFIGURATIONS)
        if unknown or "plain" not in self.configurations:
            raise OptionsError("configurations must include plain and name only %s, got %s"
                             % (", ".join(CONFIGURATIONS), ",".join(self.configurations)))
        if min(self.batch_size, self.steps) < 1 or self.warmup < 0:
            raise OptionsError("batch size and steps must be >= 1 and warmup >= 0")

    @property
    def shape(self):
        return self.data_shape or get_config(self.network)["data_shape"]


@dataclass(frozen=True)
class CalibrationBenchmarkOptions:
    network: str = network_flag("faster_rcnn_resnet50")
    data_shape: Optional[int] = data_shape_flag(max_size=True)  # None: the config's
    max_size: Optional[int] = max_size_flag()  # Faster R-CNN only; None: the config's
    images: int = flag(2, "random calibration images", type=positive_int)
    batch_size: int = batch_size_flag(1)
    calib_mode: str = flag("naive", "naive: observed min/max; entropy: KL-optimal thresholds",
                           choices=CALIB_MODES)
    collectors: Tuple[str, ...] = flag(("outputs", "monitor"), "comma-separated, of: %s"
                                       % ", ".join(COLLECTORS), type=comma_list(str))

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-calibration``'s parsed flags, those of ``values``
        given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        if self.calib_mode not in CALIB_MODES or not set(self.collectors) <= set(COLLECTORS):
            raise OptionsError("calibration mode must be one of %s and collectors of %s, got "
                               "%r and %s" % (", ".join(CALIB_MODES), ", ".join(COLLECTORS),
                                              self.calib_mode, ",".join(self.collectors)))
        if min(self.images, self.batch_size) < 1 or self.images % self.batch_size:
            raise OptionsError("images (%d) must be a positive multiple of the batch size (%d)"
                               % (self.images, self.batch_size))

    @property
    def overrides(self):
        """The config fields the flags set."""
        sizes = {"data_shape": self.data_shape, "max_size": self.max_size}
        return {field: value for field, value in sizes.items() if value is not None}


GLUONCV_RECIPES = {
    "ssd_resnet50_v1_gluoncv_voc": "ssd_512_resnet50_v1_voc",
    "ssd_resnet50_v1_gluoncv_coco": "ssd_512_resnet50_v1_coco",
    "faster_rcnn_fpn_resnet50_gluoncv_coco": "faster_rcnn_fpn_resnet50_v1b_coco",
}
"""Our network -> the GluonCV network whose training recipe runs beside it (the same
network: ``zoo import-gluoncv`` maps one onto the other)."""


@dataclass(frozen=True)
class TrainBenchmarkOptions:
    network: str = flag("ssd_resnet50_v1_gluoncv_voc", "registered model; --compare gluoncv "
                        "knows %s" % ", ".join(GLUONCV_RECIPES), choices=list_models(),
                        metavar="NAME")
    data_shape: Optional[int] = data_shape_flag(max_size=True)  # None: the config's
    max_size: Optional[int] = max_size_flag()  # Faster R-CNN: the longer side's limit
    batch_size: int = batch_size_flag(4)
    steps: int = flag(8, "steps per round: one epoch of each side", type=positive_int)
    rounds: int = flag(3, "timed rounds per side", type=positive_int)
    warmup_rounds: int = flag(1, "untimed rounds per side first", type=nonnegative_int)
    data_threads: int = flag(2, "our loader's threads and GluonCV's worker processes",
                             type=positive_int)
    image_size: int = flag(448, "side of the embedded JPEGs, generated into --data-root",
                           type=positive_int)
    num_images: int = flag(64, "distinct images generated; rounds cycle over them",
                           type=positive_int)
    data_root: Optional[str] = flag(     # None: output/shapes_<image_size>
        None, "folder of the generated images (default: output/shapes_<image-size>)")
    freeze: Optional[str] = flag(        # regular expression of our parameters kept fixed
        None, "regular expression of our parameters kept fixed (GluonCV's recipe trains its "
              "network's collect_train_params())")
    compare: Optional[str] = flag(       # None (the flag's "none"): ours only
        "gluoncv", "'health': ours with the training-health checks off and on, alternating "
                   "(their cost); 'none': time ours only",
        choices=("gluoncv", "health", "none"))
    dtypes: Tuple[str, ...] = flag(      # auto: bf16 where native, else fp32 only
        ("fp32", "auto"), "comma-separated precisions of our side, each run in turn beside "
                          "GluonCV's (zoo train --dtype): %s; auto is bf16 where the CPU has "
                          "it, else fp32 (default: %%(default)s)" % ", ".join(TRAIN_DTYPES),
        type=comma_list(train_dtype))
    peak_probes: int = flag(             # the best kept
        5, "runs of each matmul peak probe (fp32, bf16), the best kept; 0: no ratio to the "
           "peaks (default: %(default)s)", type=nonnegative_int)
    peak_seconds: float = flag(1.0, "duration of each peak probe (default: %(default)s)",
                               type=positive_float)

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-train``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        # Their modules load MXNet: imported when options are made, which the parser
        # (zoo benchmark-train --help) does not do.
        from zoo.engine.precision import check_dtype
        from zoo.engine.trainer import check_pattern
        if self.network not in list_models():
            raise OptionsError("unknown network %r; known: %s"
                               % (self.network, ", ".join(list_models())))
        if self.compare not in (None, "gluoncv", "health"):
            raise OptionsError("compare must be gluoncv, health or None, got %r"
                               % (self.compare,))
        if self.compare == "gluoncv" and self.network not in GLUONCV_RECIPES:
            raise OptionsError("no GluonCV recipe for %s; --compare gluoncv knows %s"
                               % (self.network, ", ".join(GLUONCV_RECIPES)))
        for name in ("batch_size", "steps", "rounds", "data_threads", "image_size",
                     "num_images", "data_shape", "max_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise OptionsError("%s must be >= 1, got %d" % (name, value))
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        if not self.dtypes:
            raise OptionsError("dtypes: give at least one of %s" % ", ".join(TRAIN_DTYPES))
        for dtype in self.dtypes:
            check_dtype(dtype, flag="--dtypes")
        for name in ("warmup_rounds", "peak_probes"):
            if getattr(self, name) < 0:
                raise OptionsError("%s must be >= 0, got %d" % (name, getattr(self, name)))
        if self.peak_seconds <= 0:
            raise OptionsError("peak_seconds must be > 0, got %g" % self.peak_seconds)
        check_pattern("freeze", self.freeze)

    @property
    def samples_per_round(self):
        return self.steps * self.batch_size

    def precisions(self):
        """Our sides' precisions, ``auto`` resolved on this CPU, each once, in order."""
        from zoo.engine.precision import resolve_dtype
        resolved = [resolve_dtype(dtype)[0] for dtype in self.dtypes]
        return tuple(dict.fromkeys(resolved))


@dataclass(frozen=True)
class TilesBenchmarkOptions:
    """What ``zoo benchmark-tiles`` scores (:mod:`zoo_bench.tiles`): a trained shapes
    ``checkpoint`` (artifact prefix, ``.onnx`` or ``.xml``) on ``num_images`` generated
    photos of ``width`` x ``height`` with small shapes (``object_sides``: the least and most
    side of a shape, as a share of the photo's longer side), whole and in tiles of each of
    ``tiles`` pixels overlapping ``tile_overlap`` (None: the tiles' default)."""
    checkpoint: str = flag(os.path.join("output", "train", "ssd_mobilenetv2_stride8"),
                           "a detector of the shapes classes (`make demo` trains one): "
                           "artifact prefix, .onnx or .xml")
    work_dir: str = flag(os.path.join("output", "benchmark_tiles"),
                         "where the photos are generated (kept for the next run)")
    num_images: int = flag(12, "photos to generate", type=positive_int)
    width: int = flag(4000, "photo width", type=positive_int)
    height: int = flag(3000, "photo height", type=positive_int)
    object_sides: Tuple[float, float] = flag(
        (0.01, 0.05), "a shape's side, as a share of the photo's longer side",
        type=comma_list(float_in(0.0, 1.0, low_open=True)), metavar="LEAST,MOST")
    objects: int = flag(30, "shapes asked per photo (fewer where they do not fit)",
                        type=positive_int)
    tiles: Tuple[int, ...] = flag((800, 400), "tile sizes to score, each beside the "
                                              "whole-photo pass",
                                  type=comma_list(positive_int), metavar="SIZE,...")
    tile_overlap: Optional[float] = flag(
        None, "share of a tile's side its neighbours overlap (default %g)" % DEFAULT_OVERLAP,
        type=float_in(0.0, 1.0, high_open=True), metavar="SHARE")
    batch_size: int = batch_size_flag(8)
    seed: int = flag(0, "of the generated photos", type=int)
    progress: bool = progress_flag()

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-tiles``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if min(self.num_images, self.width, self.height, self.objects, self.batch_size) < 1:
            raise OptionsError("num_images, width, height, objects and batch_size must be at "
                               "least 1")
        low, high = self.object_sides
        if not 0.0 < low <= high < 1.0:
            raise OptionsError("object_sides must be two shares of the photo's side, 0 < "
                               "least <= most < 1, got %s" % (self.object_sides,))


FROM_SCRATCH = "none"
"""``--init-from`` of ``zoo benchmark-small-objects`` that starts every run from random
weights."""


def require_trained(flag, prefix, otherwise):
    """Refuse in one line, before any data is made, a start ``prefix`` (given as ``flag``, by
    default the detector ``make demo`` trains) that holds no trained artifact; ``none``
    (:data:`FROM_SCRATCH`) asks for none, ``otherwise`` says what it gives."""
    from zoo import artifact  # loads MXNet, which the parsing and --help do without
    if prefix != FROM_SCRATCH and not artifact.epochs(prefix):
        raise OptionsError("%s %s: no trained artifact there; run `make demo` first (it trains "
                           "that detector, 5-10 minutes), or give %s %s %s"
                           % (flag, prefix, flag, FROM_SCRATCH, otherwise))


@dataclass(frozen=True)
class SmallObjectsBenchmarkOptions:
    """What ``zoo benchmark-small-objects`` runs (:mod:`zoo_bench.small_objects`): bird
    photos generated into ``work_dir`` (``train_images`` and ``val_images`` of ``width`` x
    ``height``, ``test_images`` of ``test_width`` x ``test_height``), then the recipe of
    docs/training.md: ``network`` trained at ``data_shape`` on ``tiles``-pixel tiles with
    its config's anchors from ``init_from`` (by default the detector ``make demo`` trains)
    for ``epochs`` (``batch_size``, ``lr``), scored on the held-out whole photos and on the
    test photos; beside it the same from random weights, with fitted anchors and on whole
    photos for ``baseline_epochs`` each (0: not run). ``generate_only``: make the photos,
    print their paths, train nothing."""
    work_dir: str = flag(os.path.join("output", "benchmark_small_objects"),
                         "where the photos are generated (kept for the next run) and the "
                         "models trained")
    train_images: int = flag(60, "training photos", type=positive_int)
    val_images: int = flag(20, "held-out photos", type=positive_int)
    test_images: int = flag(6, "large test photos zoo detect --crops runs on",
                            type=positive_int)
    width: int = flag(1600, "training and held-out photo width", type=positive_int)
    height: int = flag(1200, "training and held-out photo height", type=positive_int)
    test_width: int = flag(4000, "test photo width", type=positive_int)
    test_height: int = flag(3000, "test photo height", type=positive_int)
    network: str = network_flag("ssd_mobilenetv2_stride8")
    data_shape: int = flag(192, "input side the network trains at", type=positive_int)
    tiles: int = flag(320, "tile side the recipe trains and detects in", type=positive_int)
    epochs: int = flag(48, "epochs of the recipe's training", type=positive_int)
    baseline_epochs: int = flag(6, "epochs of each run beside the recipe (tiles with fitted "
                                   "anchors, whole photos; 0: not run)",
                                type=nonnegative_int)
    batch_size: int = batch_size_flag(8)
    lr: Optional[float] = flag(None, "learning rate (default: the network's)",
                               type=positive_float)
    init_from: str = flag(trained_prefix(), "artifact the runs start from (zoo train "
                                            "--init-from; default: the detector make demo "
                                            "trains); %r: random weights" % FROM_SCRATCH,
                          metavar="PREFIX")
    seed: int = flag(0, "of the generated photos and of training", type=int)
    generate_only: bool = flag(False, "make the photos and their COCO files, print their "
                                      "paths, train nothing")
    progress: bool = progress_flag()

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-small-objects``'s parsed flags, those of ``values``
        given."""
        return options_from(cls, args, **values)

    @property
    def from_scratch(self):
        return self.init_from == FROM_SCRATCH

    def __post_init__(self):
        if unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        # Before the photos are made and minutes spent: the default start is make demo's.
        if not self.generate_only:
            require_trained("--init-from", self.init_from, "to start from random weights")


PHOTO_SUBJECTS = ("zoo-fp32", "zoo-int8", "gluoncv", "onnx", "openvino")
"""What ``zoo benchmark-photos`` times (:mod:`zoo_bench.large_photos`): ``zoo detect`` of the
fp32 artifact, of its int8 quantization, of its ONNX export (ONNX Runtime) and of its
OpenVINO export; GluonCV's ``load_test`` and ``net(x)``."""
PHOTO_ISAS = ("avx2",)
"""``--isa``: the instruction set oneDNN is capped to in every run (``DNNL_MAX_CPU_ISA``)."""
FIXED_PHOTOS = 2
"""The photos of ``zoo benchmark-photos``' fixed-cost run: one of each orientation (the
generated ones alternate), so that it binds what the run on every photo binds (an executor an
input shape: a second bind in the run on every photo, and none in the fixed cost, had put a
second or two on the seconds per photo)."""


@dataclass(frozen=True)
class PhotosBenchmarkOptions:
    """What ``zoo benchmark-photos`` times: ``zoo detect`` end to end (default flags) of
    each of ``subjects`` on the same large photos, beside GluonCV's ``load_test`` and
    ``net(x)``. The model: ``checkpoint`` (an fp32 artifact, run at its own size), else
    ``network`` exported with fresh parameters at ``data_shape`` x ``max_size`` into
    ``output_dir`` (kept there, as are its int8, ONNX and OpenVINO forms)."""
    images: Tuple[str, ...] = flag((), "JPEG photos to detect on, at least %d (default: "
                                       "--num-images generated ones)" % (FIXED_PHOTOS + 1),
                                   nargs="+", metavar="JPEG")
    num_images: int = flag(8, "photos generated without --images (at least %d), every other "
                              "one turned by EXIF orientation 6" % (FIXED_PHOTOS + 1),
                           type=positive_int)
    image_size: Tuple[int, int] = flag((4000, 3000), "size of the generated photos, "
                                                     "WIDTHxHEIGHT", type=image_size,
                                       metavar="WxH")
    checkpoint: Optional[str] = flag(None, "fp32 artifact prefix to time, run at its own "
                                           "input size (default: --network exported with "
                                           "fresh parameters)", metavar="PREFIX")
    network: str = flag("faster_rcnn_fpn_resnet50", "registered model exported without "
                                                    "--checkpoint")
    data_shape: int = flag(600, "short side --network is exported at (GluonCV's load_test "
                                "short, too)", type=positive_int)
    max_size: int = flag(1000, "long-side limit --network is exported at (GluonCV's "
                               "load_test max_size, too)", type=positive_int)
    subjects: Tuple[str, ...] = flag(("zoo-fp32", "zoo-int8", "gluoncv"),
                                     "comma-separated, of %s" % ", ".join(PHOTO_SUBJECTS),
                                     type=comma_list(str), metavar="NAME,...")
    gluoncv_network: str = flag("faster_rcnn_fpn_resnet50_v1b_coco",
                                "GluonCV's model the gluoncv subject runs (untrained, with "
                                "the artifact's number of classes)", metavar="NAME")
    runs: int = flag(1, "runs of each subject's two jobs (all photos, the first %d); the "
                        "median is reported" % FIXED_PHOTOS, type=positive_int)
    isa: Optional[str] = flag(None, "avx2: cap oneDNN to AVX2 in every run "
                                    "(DNNL_MAX_CPU_ISA=AVX2), as on a CPU without AVX-512 "
                                    "or VNNI", choices=PHOTO_ISAS)
    profile: bool = flag(True, "no profile of where the zoo subjects' time goes")
    detect_flags: Tuple[str, ...] = flag(
        (), "more zoo detect flags for the zoo subjects, as one word: "
            "--detect-flags='--no-pictures' or --detect-flags='--batch-size 8' (default: "
            "none, zoo detect's defaults but --crops)", type=shlex.split, metavar="FLAGS")
    output_dir: str = flag(os.path.join("output", "benchmark_photos"),
                           "folder of the generated photos, the models, the runs' outputs, "
                           "logs and profiles")
    seed: int = flag(0, "seed of the generated photos", type=int)

    def __post_init__(self):
        object.__setattr__(self, "images", tuple(self.images))
        object.__setattr__(self, "subjects", tuple(self.subjects))
        object.__setattr__(self, "detect_flags", tuple(self.detect_flags))
        if not self.subjects or set(self.subjects) - set(PHOTO_SUBJECTS):
            raise OptionsError("subjects must be a non-empty list of %s, got %s"
                               % (", ".join(PHOTO_SUBJECTS), ",".join(self.subjects)))
        if min(self.data_shape, self.max_size, self.runs, *self.image_size) < 1:
            raise OptionsError("data_shape, max_size, runs and image_size must be at least 1")
        if (len(self.images) if self.images else self.num_images) <= FIXED_PHOTOS:
            raise OptionsError("at least %d photos are needed: a subject's cost per photo is "
                               "the time of all over that of the first %d"
                               % (FIXED_PHOTOS + 1, FIXED_PHOTOS))
        missing = [path for path in self.images if not os.path.isfile(path)]
        if missing:
            raise OptionsError("image %s: no such file" % missing[0])
        if self.checkpoint is None and unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        if self.isa not in (None,) + PHOTO_ISAS:
            raise OptionsError("isa must be one of %s, got %r" % (", ".join(PHOTO_ISAS),
                                                                  self.isa))

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo benchmark-photos``'s parsed flags, those of ``values``
        given."""
        return options_from(cls, args, **values)


@dataclass(frozen=True)
class ClusterBenchmarkOptions:
    """What ``zoo benchmark-cluster`` times (:mod:`zoo_bench.cluster`): ``zoo detect`` of
    ``checkpoint`` on the same photos without Ray, and with ``--ray`` on local Ray clusters
    of each count of ``nodes`` (``ray.cluster_utils.Cluster``, ``node_cpus`` CPUs a node,
    one detector a CPU). The photos and the model as ``zoo benchmark-photos`` makes them."""
    images: Tuple[str, ...] = field_of(PhotosBenchmarkOptions, "images")
    num_images: int = flag(16, "photos generated without --images (at least %d)"
                           % (FIXED_PHOTOS + 1), type=positive_int)
    image_size: Tuple[int, int] = field_of(PhotosBenchmarkOptions, "image_size")
    checkpoint: Optional[str] = flag(None, "artifact prefix, or deployed .onnx or .xml file, "
                                           "to time (default: --network exported with fresh "
                                           "parameters)", metavar="CHECKPOINT")
    network: str = field_of(PhotosBenchmarkOptions, "network")
    data_shape: int = field_of(PhotosBenchmarkOptions, "data_shape")
    max_size: int = field_of(PhotosBenchmarkOptions, "max_size")
    nodes: Tuple[int, ...] = flag((1, 2), "node counts of the local Ray clusters timed",
                                  type=comma_list(positive_int), metavar="N,...")
    node_cpus: int = flag(1, "CPUs of each Ray node (its detectors: one a CPU)",
                          type=positive_int, metavar="N")
    runs: int = field_of(PhotosBenchmarkOptions, "runs")
    detect_flags: Tuple[str, ...] = field_of(PhotosBenchmarkOptions, "detect_flags")
    output_dir: str = flag(os.path.join("output", "benchmark_cluster"),
                           "folder of the generated photos, the model, the runs' outputs and "
                           "logs")
    seed: int = field_of(PhotosBenchmarkOptions, "seed")

    def __post_init__(self):
        for name in ("images", "nodes", "detect_flags"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.nodes or min(self.nodes + (self.node_cpus, self.runs)) < 1:
            raise OptionsError("nodes (at least one count), node_cpus and runs must be at "
                               "least 1")
        if (len(self.images) if self.images else self.num_images) <= FIXED_PHOTOS:
            raise OptionsError("at least %d photos are needed: a run's photos/s counts the "
                               "photos after the first %d" % (FIXED_PHOTOS + 1, FIXED_PHOTOS))
        missing = [path for path in self.images if not os.path.isfile(path)]
        if missing:
            raise OptionsError("image %s: no such file" % missing[0])
        if self.checkpoint is None and unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))

    @classmethod
    def from_flags(cls, args, **values):
        return options_from(cls, args, **values)


PARITY_DEFAULTS = {
    # make demo's network on GluonCV's SSD layout from make demo's trunk, one epoch: the
    # seeds land within 3 points, where from scratch (--backbone-from none --epochs 5
    # --lr-steps 4) they spread by 12 (BENCHMARKS.md, "SSD from a trained trunk").
    "ssd": dict(epochs=1, batch_size=16, data_shape=256, lr=0.02, lr_steps=(),
                warmup_epochs=0.2, num_train=1500, backbone_from=trained_prefix(),
                anchors="config", run_sides="in-turn", target=0.5),
    # GluonCV's script trains Faster R-CNN one image a device: batch 1 on both sides, after a
    # half-epoch warm-up. From a trained trunk (make demo's, as GluonCV's recipes start from
    # an ImageNet one), on 1000 images at a short side of 160 (the boxes' median 34 pixels,
    # on a stride-16 map), anchors fitted to them on both sides (the config's 16-256 px
    # match 47% at IoU 0.7, fitted 95%), 6 epochs. The two sides of a seed train at once, an
    # OpenMP thread each (at one image a step neither gains much from a second thread): a
    # seed took 29 minutes so, where in turn it would take about 37 (BENCHMARKS.md,
    # "Faster R-CNN C4 with fitted anchors").
    "faster_rcnn": dict(epochs=6, batch_size=1, data_shape=160, lr=0.02, lr_steps=(5,),
                        warmup_epochs=0.5, num_train=1000, backbone_from=trained_prefix(),
                        anchors="fitted", run_sides="together", target=0.3),
}
"""Per architecture of ``zoo benchmark-parity``: the defaults of the flags left out (epochs,
images a step, input side, SGD lr, lr steps, warm-up, training images, the backbone's
start) and ``target``, the held-out VOC07 mAP both sides should reach (reported beside the
verdict)."""
PARITY_ARCHITECTURES = tuple(PARITY_DEFAULTS)
"""What ``zoo benchmark-parity`` compares: SSD and Faster R-CNN C4."""
PER_ARCHITECTURE = " (default: the architecture's, zoo_bench.options.PARITY_DEFAULTS)"
PARITY_SIDES = ("zoo", "gluoncv")
PARITY_INPUTS = ("own", "zoo")
"""What GluonCV's side of ``zoo benchmark-parity`` trains on: its own input pipeline, or the
zoo's loader's batches (the step compared alone, :class:`zoo_bench.parity_gluoncv.ZooBatches`)."""
PARITY_ANCHORS = ("config", "fitted")
PARITY_RUN_SIDES = ("in-turn", "together")
PARITY_AUGMENTATIONS = ("light", "ssd")
"""``ssd``: each side's SSD augmentation (GluonCV's ``SSDDefaultTrainTransform``, the zoo's
default zoom-out to 4x and IoU-constrained crop); ``light``: the same without zoom-out and
crop (``make demo``'s, from scratch the one that trains in minutes)."""


def config_assignment(value):
    """``FIELD=NUMBER`` (``--zoo-config``'s items) as ``(field, number)``."""
    field, equals, number = value.partition("=")
    try:
        return field.strip(), float(number)
    except ValueError:
        raise argparse.ArgumentTypeError("FIELD=NUMBER, got %r" % value) from None


@dataclass(frozen=True)
class ParityBenchmarkOptions:
    """What ``zoo benchmark-parity`` trains (:mod:`zoo_bench.parity`): the zoo and GluonCV on
    one network from the same initial parameters, at each of ``seeds``, with the same images
    (the embedded generator's ``preset``, ``num_train`` and ``num_val`` images), input side,
    batch, epochs and SGD settings; passing when the zoo's mean last-epoch held-out VOC07
    mAP is at most ``tolerance`` points below GluonCV's."""
    architecture: str = flag("ssd", "meta-architecture to compare", choices=PARITY_ARCHITECTURES)
    seeds: Tuple[int, ...] = flag((0, 1, 2), "seeds, one run a side each (the initial "
                                             "parameters, the data order and augmentation)",
                                  type=comma_list(nonnegative_int), metavar="S,...")
    epochs: int = flag(None, "epochs a side" + PER_ARCHITECTURE, type=positive_int)
    batch_size: int = flag(None, "images per step" + PER_ARCHITECTURE, type=positive_int)
    data_shape: int = flag(None, "input side (Faster R-CNN: short side, the long one at most "
                                 "1.5x), both sides" + PER_ARCHITECTURE, type=positive_int)
    lr: float = flag(None, "SGD learning rate, both sides" + PER_ARCHITECTURE,
                     type=positive_float)
    momentum: float = flag(0.9, "SGD momentum", type=float_in(0.0, 1.0, high_open=True))
    wd: float = flag(5e-4, "weight decay", type=float_in(0.0))
    lr_steps: Tuple[float, ...] = flag(None, "comma-separated epochs at which the lr drops"
                                             + PER_ARCHITECTURE,
                                       type=comma_list(positive_float), metavar="E,...")
    lr_factor: float = flag(0.1, "lr multiplier at each step", type=positive_float)
    warmup_epochs: float = flag(None, "linear warm-up length in epochs (from lr / 10)"
                                      + PER_ARCHITECTURE, type=float_in(0.0))
    augmentation: str = flag(
        "light", "light: colour, flip and resize on both sides (GluonCV's transform with its "
                 "zoom-out and crop made identities; the zoo's --max-expand 1 --no-crop, make "
                 "demo's); ssd: each side's whole SSD augmentation, zoom-out and crop too",
        choices=PARITY_AUGMENTATIONS)
    gluoncv_input: str = flag(
        "own", "GluonCV's training input: own (its SSD transform and DataLoader); zoo (the "
               "zoo's loader's batches, their targets by GluonCV's generator: both sides train "
               "on the same arrays and only the training step differs; SSD only)",
        choices=PARITY_INPUTS)
    preset: str = flag("hard", "the embedded generator's preset (see docs/data.md)")
    num_train: int = flag(None, "training images" + PER_ARCHITECTURE, type=positive_int)
    num_val: int = flag(200, "held-out images, scored after every epoch", type=positive_int)
    data_seed: int = flag(0, "seed of the generated images", type=nonnegative_int)
    data_workers: int = flag(2, "data workers a side (GluonCV's DataLoader processes, the "
                                "zoo's decoding threads)", type=positive_int)
    tolerance: float = flag(1.0, "points of held-out VOC07 mAP the zoo's mean may lie below "
                                 "GluonCV's and still pass", type=float_in(0.0))
    backbone_from: str = flag(
        None, "zoo artifact whose backbone arrays both sides start from (e.g. the trunk of the "
              "detector make demo trains); %r: the initialisers alone" % FROM_SCRATCH
        + PER_ARCHITECTURE, metavar="PREFIX")
    zoo_config: Tuple[Tuple[str, float], ...] = flag(
        (), "config fields set on the zoo's side only, e.g. negative_mining_ratio=1: a "
            "deliberately changed recipe, to see the verdict fail",
        type=comma_list(config_assignment), metavar="FIELD=NUMBER,...")
    anchors: str = flag(None, "config: the network config's anchors; fitted: fitted to the "
                              "training boxes at the input, on both sides (Faster R-CNN)"
                        + PER_ARCHITECTURE, choices=PARITY_ANCHORS)
    run_sides: str = flag(None, "in-turn: a seed's sides one after the other, each on every "
                                "core; together: both at once, each on half the cores"
                          + PER_ARCHITECTURE, choices=PARITY_RUN_SIDES)
    order: Tuple[str, ...] = flag(PARITY_SIDES, "sides in the order each seed trains them",
                                  type=comma_list(str), metavar="SIDE,SIDE")
    work_dir: str = flag(os.path.join("output", "benchmark_parity"),
                         "data, runs, parity_<arch>.json and .png go here")
    progress: bool = progress_flag()

    @classmethod
    def from_flags(cls, args, **values):
        return options_from(cls, args, **values)

    @property
    def target(self):
        """The held-out VOC07 mAP both sides should reach (:data:`PARITY_DEFAULTS`)."""
        return PARITY_DEFAULTS[self.architecture]["target"]

    def __post_init__(self):
        # The flags left out take the architecture's defaults (one table, PARITY_DEFAULTS).
        if self.architecture not in PARITY_DEFAULTS:
            raise OptionsError("architecture must be one of %s, got %s"
                               % (", ".join(PARITY_ARCHITECTURES), self.architecture))
        for name, value in PARITY_DEFAULTS[self.architecture].items():
            if name != "target" and getattr(self, name) is None:
                object.__setattr__(self, name, value)
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "lr_steps", tuple(self.lr_steps))
        object.__setattr__(self, "order", tuple(self.order))
        object.__setattr__(self, "zoo_config", tuple(tuple(pair) for pair in self.zoo_config))
        if sorted(self.order) != sorted(PARITY_SIDES):
            raise OptionsError("order must name zoo and gluoncv once each, got %s"
                               % ",".join(self.order))
        if self.anchors == "fitted" and self.architecture != "faster_rcnn":
            raise OptionsError("anchors fitted: Faster R-CNN's alone (the SSD compared is "
                               "GluonCV's get_ssd with its own anchor sizes)")
        if self.gluoncv_input == "zoo" and self.architecture != "ssd":
            raise OptionsError("gluoncv_input zoo trains GluonCV's SSD on the zoo's batches; "
                               "%s takes its own input" % self.architecture)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise OptionsError("seeds must be distinct, at least one")
        # Before minutes of data and training: a start that is not there.
        require_trained("--backbone-from", self.backbone_from, "for the initialisers alone")
