"""What ``zoo benchmark`` times, as options: a registered network, an artifact (on MXNet,
:mod:`zoo_bench.inference`) or a deployed ``.onnx``/``.xml`` file (on its own runtime,
:mod:`zoo_bench.deployed`). Loads no MXNet, so that a deployment without it can time its
files."""
from dataclasses import dataclass
from typing import Optional, Tuple

from zoo.config.registry import unknown_network
from zoo.errors import OptionsError
from zoo.onnx.deployed import is_deployed

__all__ = ["BenchmarkOptions", "COMPARISONS", "DTYPES"]

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
