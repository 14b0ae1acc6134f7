"""What the ``zoo benchmark*`` commands time, as options: ``zoo benchmark``'s a registered
network, an artifact (on MXNet, :mod:`zoo_bench.inference`) or a deployed ``.onnx``/``.xml``
file (on its own runtime, :mod:`zoo_bench.deployed`); then those of the data pipeline, the
detector, memory saving, calibration and the training step, beside the modules that time
them. Loads no MXNet, so that a deployment without it can time its files, and every
benchmark's ``--help`` answers without loading it."""
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo.choices import CALIB_MODES, COLLECTORS, TRAIN_DTYPES
from zoo.config.registry import get_config, list_models, unknown_network
from zoo.data.factory import KINDS
from zoo.errors import OptionsError
from zoo.flags import comma_list, flag, options_from, positive_int
from zoo.inference.runner import SCORE_THRESHOLD
from zoo.onnx.deployed import is_deployed

__all__ = ["BUSY_CORES", "BenchmarkOptions", "COMPARISONS", "CONFIGURATIONS",
           "CalibrationBenchmarkOptions", "DATA_COMPARISONS", "DTYPES", "DataBenchmarkOptions",
           "DecodeBenchmarkOptions",
           "PHOTO_ISAS", "PHOTO_SUBJECTS", "PhotosBenchmarkOptions", "image_size",
           "DetectorBenchmarkOptions", "GLUONCV_RECIPES", "MemoryBenchmarkOptions",
           "TilesBenchmarkOptions", "TrainBenchmarkOptions"]

DTYPES = ("fp32", "int8", "bf16")
COMPARISONS = ("gluoncv", "onnxruntime", "openvino", "all")


@dataclass(frozen=True)
class BenchmarkOptions:
    """What to time: a registered ``network`` (built fresh, in each of ``dtypes``) or a saved
    ``checkpoint`` (run as saved, with its own graph, parameters and data shape: an artifact
    prefix on MXNet, or a deployed ``.onnx``/``.xml`` file alone on its runtime)."""
    network: Optional[str] = None
    checkpoint: Optional[str] = None
    epoch: Optional[int] = None          # of the checkpoint; None: its best, else newest
    data_shape: Optional[int] = None     # None: the config's
    max_size: Optional[int] = None       # a Faster R-CNN's long side; None: the config's
    dtypes: Tuple[str, ...] = ("fp32",)
    batch_sizes: Tuple[int, ...] = (1,)
    runs: int = 5                        # timed runs; the median is reported
    warmup: int = 2
    compare: Optional[str] = None        # one of COMPARISONS or None
    num_classes: int = 20                # VOC's 20, as GluonCV's models
    plot: Optional[str] = None           # PNG of images/s against batch size
    profile: bool = False                # time each part of our graphs too
    # compare all on a trained checkpoint: also score each deployment on this dataset split
    # (zoo_bench.accuracy), its int8 calibrated on the first calib_images of calib_split
    data_root: Optional[str] = None
    dataset: str = "voc"
    split: str = "val"
    calib_split: str = "train"           # not the scored split: no image scored calibrates
    annotations: Optional[str] = None    # coco: the annotation file ({split}: the split)
    image_dir: Optional[str] = None      # coco: the image folder ({split}: the split)
    calib_images: int = 32

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
    images: Tuple[str, ...] = ()         # JPEG files; none: num_images generated
    num_images: int = 8                  # generated, every other one turned (EXIF 6)
    image_size: Tuple[int, int] = (4000, 3000)  # generated: (width, height)
    output_dir: str = os.path.join("output", "benchmark_decode")  # generated into
    data_shape: int = 600                # decoded for a Faster R-CNN input: short side
    max_size: int = 1000                 # and long-side limit
    seed: int = 0

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
    dataset: str = "embedded"
    data_root: Optional[str] = None      # embedded: output/shapes_<image_size>, generated
    split: str = "train"
    skip_bad: bool = False
    annotations: Optional[str] = None    # coco: the annotation file ({split}: the split)
    image_dir: Optional[str] = None      # coco: the image folder ({split}: the split)
    image_size: int = 448                # embedded only: side of the generated JPEGs
    num_images: int = 64                 # embedded only: images generated
    data_shape: int = 512
    batch_size: int = 32
    data_threads: Optional[int] = None   # threads for ours, processes for GluonCV; None: cores
    batches: Optional[int] = None        # timed batches per side; None: 5 per worker
    warmup: Optional[int] = None         # untimed batches first; None: one per worker
    seed: int = 0
    opencv_threads: Optional[int] = None  # cv2.setNumThreads for our side; None: OpenCV's
    compare: Optional[str] = "gluoncv"   # or None: ours only

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
    network: Optional[str] = "ssd_mobilenetv2_stride8"
    checkpoint: Optional[str] = None
    data_shape: Optional[int] = 192      # None: the config's; ignored for a checkpoint
    image_dir: Optional[str] = None
    num_images: int = 64
    image_size: int = 256
    work_dir: str = os.path.join("output", "benchmark_detector")
    batch_size: int = 8
    runs: int = 10                       # timed passes of each kind; the best is reported
    score_threshold: float = SCORE_THRESHOLD  # a detector's, zoo detect's
    mixed_orientations: bool = False     # generate portrait and landscape images instead

    def __post_init__(self):
        if self.checkpoint is None and unknown_network(self.network):
            raise OptionsError(unknown_network(self.network))
        if min(self.batch_size, self.runs, self.num_images, self.image_size) < 1:
            raise OptionsError("batch_size, runs, num_images and image_size must be at least 1")


CONFIGURATIONS = {
    "plain": {},
    "mxnet-mirror": {"MXNET_BACKWARD_DO_MIRROR": "1"},
    "memory-saving": {},
}
"""The configurations ``zoo benchmark-memory`` measures, each with the environment its
process runs in (see :mod:`zoo_bench.memory`)."""


@dataclass(frozen=True)
class MemoryBenchmarkOptions:
    network: str = "ssd_resnet101"
    data_shape: Optional[int] = None    # None: the config's
    batch_size: int = 8                 # images per training step
    steps: int = 3                      # timed steps; the median is reported
    warmup: int = 1                     # untimed steps first
    configurations: Tuple[str, ...] = tuple(CONFIGURATIONS)

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
    network: str = "faster_rcnn_resnet50"
    data_shape: Optional[int] = None     # None: the config's
    max_size: Optional[int] = None       # Faster R-CNN only; None: the config's
    images: int = 2                      # random calibration images
    batch_size: int = 1
    calib_mode: str = "naive"
    collectors: Tuple[str, ...] = ("outputs", "monitor")

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
    network: str = "ssd_resnet50_v1_gluoncv_voc"
    data_shape: Optional[int] = None    # None: the config's
    max_size: Optional[int] = None      # Faster R-CNN: the longer side's limit; None: config's
    batch_size: int = 4
    steps: int = 8                      # steps per round (one epoch of each side)
    rounds: int = 3                     # timed rounds per side
    warmup_rounds: int = 1              # untimed rounds per side first
    data_threads: int = 2               # our loader's threads, GluonCV's worker processes
    image_size: int = 448               # side of the embedded JPEGs (generated)
    num_images: int = 64                # distinct images; rounds cycle over them
    data_root: Optional[str] = None     # None: output/shapes_<image_size>
    freeze: Optional[str] = None        # regular expression of our parameters kept fixed
    compare: Optional[str] = "gluoncv"  # "health": ours with the health checks off and on;
                                        # None: ours only
    dtypes: Tuple[str, ...] = ("fp32", "auto")  # our sides' precisions (zoo train --dtype);
                                                # auto: bf16 where native, else fp32 only
    peak_probes: int = 5                # runs of each matmul peak probe, the best kept
                                        # (0: no probe, no ratio to the peaks)
    peak_seconds: float = 1.0           # each probe's duration

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
    checkpoint: str = os.path.join("output", "train", "ssd_mobilenetv2_stride8")
    work_dir: str = os.path.join("output", "benchmark_tiles")
    num_images: int = 12
    width: int = 4000
    height: int = 3000
    object_sides: Tuple[float, float] = (0.01, 0.05)
    objects: int = 30                    # shapes asked per photo (fewer where none fits)
    tiles: Tuple[int, ...] = (800, 400)
    tile_overlap: Optional[float] = None
    batch_size: int = 8
    seed: int = 0

    def __post_init__(self):
        if min(self.num_images, self.width, self.height, self.objects, self.batch_size) < 1:
            raise OptionsError("num_images, width, height, objects and batch_size must be at "
                               "least 1")
        low, high = self.object_sides
        if not 0.0 < low <= high < 1.0:
            raise OptionsError("object_sides must be two shares of the photo's side, 0 < "
                               "least <= most < 1, got %s" % (self.object_sides,))


def image_size(text):
    """``WIDTHxHEIGHT`` as ``(width, height)``: the size of generated photos."""
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ValueError("expected WIDTHxHEIGHT, e.g. 4000x3000") from None
    return width, height


PHOTO_SUBJECTS = ("zoo-fp32", "zoo-int8", "gluoncv", "onnx", "openvino")
"""What ``zoo benchmark-photos`` times (:mod:`zoo_bench.large_photos`): ``zoo detect`` of the
fp32 artifact, of its int8 quantization, of its ONNX export (ONNX Runtime) and of its
OpenVINO export; GluonCV's ``load_test`` and ``net(x)``."""
PHOTO_ISAS = ("avx2",)
"""``--isa``: the instruction set oneDNN is capped to in every run (``DNNL_MAX_CPU_ISA``)."""


@dataclass(frozen=True)
class PhotosBenchmarkOptions:
    """What ``zoo benchmark-photos`` times: ``zoo detect`` end to end (default flags) of
    each of ``subjects`` on the same large photos, beside GluonCV's ``load_test`` and
    ``net(x)``. The model: ``checkpoint`` (an fp32 artifact, run at its own size), else
    ``network`` exported with fresh parameters at ``data_shape`` x ``max_size`` into
    ``output_dir`` (kept there, as are its int8, ONNX and OpenVINO forms)."""
    images: Tuple[str, ...] = flag((), "JPEG photos to detect on, at least 2 (default: "
                                       "--num-images generated ones)", nargs="+",
                                   metavar="JPEG")
    num_images: int = flag(8, "photos generated without --images (at least 2), every other "
                              "one turned by EXIF orientation 6", type=positive_int)
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
    runs: int = flag(1, "runs of each subject's two jobs (all photos, one photo); the "
                        "median is reported", type=positive_int)
    isa: Optional[str] = flag(None, "avx2: cap oneDNN to AVX2 in every run "
                                    "(DNNL_MAX_CPU_ISA=AVX2), as on a CPU without AVX-512 "
                                    "or VNNI", choices=PHOTO_ISAS)
    profile: bool = flag(True, "no profile of where the zoo subjects' time goes")
    output_dir: str = flag(os.path.join("output", "benchmark_photos"),
                           "folder of the generated photos, the models, the runs' outputs, "
                           "logs and profiles")
    seed: int = flag(0, "seed of the generated photos", type=int)

    def __post_init__(self):
        object.__setattr__(self, "images", tuple(self.images))
        object.__setattr__(self, "subjects", tuple(self.subjects))
        if not self.subjects or set(self.subjects) - set(PHOTO_SUBJECTS):
            raise OptionsError("subjects must be a non-empty list of %s, got %s"
                               % (", ".join(PHOTO_SUBJECTS), ",".join(self.subjects)))
        if min(self.data_shape, self.max_size, self.runs, *self.image_size) < 1:
            raise OptionsError("data_shape, max_size, runs and image_size must be at least 1")
        if (len(self.images) if self.images else self.num_images) < 2:
            raise OptionsError("at least 2 photos are needed: a subject's cost per photo is "
                               "the time of all over that of one")
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
