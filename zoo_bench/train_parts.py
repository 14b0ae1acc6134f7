"""The parts of ``zoo benchmark-train`` that both sides share (:mod:`zoo_bench.train`, ours,
and :mod:`zoo_bench.gluoncv_recipes`, GluonCV's): its options, the recipes it knows, the
rounds and results of a side, and the clock that times each part of a step."""
import resource
from dataclasses import dataclass, field
from typing import Optional, Tuple

import mxnet as mx

from zoo_bench.data import cpu_seconds
from zoo_bench.timing import Stopwatch
from zoo.config.registry import list_models
from zoo.engine.precision import DTYPES, check_dtype, resolve_dtype
from zoo.engine.trainer import check_pattern
from zoo.errors import OptionsError

__all__ = ["GLUONCV_RECIPES", "PARTS", "PartClock", "Round", "SGD", "SideResult", "TARGETS",
           "TrainBenchmarkOptions", "TrainBenchmarkResult"]


GLUONCV_RECIPES = {
    "ssd_resnet50_v1_gluoncv_voc": "ssd_512_resnet50_v1_voc",
    "ssd_resnet50_v1_gluoncv_coco": "ssd_512_resnet50_v1_coco",
    "faster_rcnn_fpn_resnet50_gluoncv_coco": "faster_rcnn_fpn_resnet50_v1b_coco",
}
"""Our network -> the GluonCV network whose training recipe runs beside it (the same
network: ``zoo import-gluoncv`` maps one onto the other)."""
PARTS = ("data", "forward", "backward", "update", "metrics", "logging")
"""The parts of a step, one after the other."""
TARGETS = "targets"
"""A share of ``forward``: the time of our Python target operators (Faster R-CNN's
``zoo_rpn_target`` and ``zoo_proposal_target``). Elsewhere targets are inside another part:
our SSD's ``MultiBoxTarget`` in forward, GluonCV's in its data workers (data), its Faster
R-CNN's R-CNN targets in forward."""
SGD = dict(lr=0.001, momentum=0.9, wd=5e-4)
"""GluonCV's train_ssd.py defaults, for both sides and both families (the values do not
change the work of a step)."""


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
            raise OptionsError("dtypes: give at least one of %s" % ", ".join(DTYPES))
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
        resolved = [resolve_dtype(dtype)[0] for dtype in self.dtypes]
        return tuple(dict.fromkeys(resolved))


@dataclass(frozen=True)
class Round:
    """One timed round of one side: samples, wall and CPU seconds (this process and the
    side's worker processes), and seconds per part."""
    samples: int
    steps: int
    seconds: float
    cpu_seconds: float
    parts: dict


@dataclass(frozen=True)
class SideResult:
    label: str
    trainable_params: int
    rounds: tuple
    kernels: Optional[object] = None    # ours: a zoo_bench.train_kernels.KernelProfile

    def total(self, field):
        return sum(getattr(r, field) for r in self.rounds)

    @property
    def samples_per_s(self):
        return self.total("samples") / self.total("seconds")

    @property
    def step_samples_per_s(self):
        """Samples/s of the step alone: the time waiting for data taken out."""
        return self.total("samples") / (self.total("seconds") - self.part_seconds("data"))

    @property
    def cpu_s_per_sample(self):
        return self.total("cpu_seconds") / self.total("samples")

    def part_seconds(self, part):
        return sum(r.parts.get(part, 0.0) for r in self.rounds)

    def ms_per_step(self, part):
        return 1e3 * self.part_seconds(part) / self.total("steps")

    def round_rates(self):
        return [r.samples / r.seconds for r in self.rounds]


@dataclass(frozen=True)
class TrainBenchmarkResult:
    ours: SideResult                # in the first of our precisions (fp32 by default)
    gluoncv: Optional[SideResult]   # None without the comparison
    ours_by_dtype: dict = field(default_factory=dict)   # {"fp32": SideResult, "bf16": ...}


class PartClock:
    """Seconds per part of the steps of the current round of one side, and its rounds."""

    def __init__(self, pids=()):
        self.pids, self.parts, self.rounds = list(pids), {}, []
        self._start = None

    def timed(self, part, function):
        """``function`` made to add its time, its operators waited for, to ``part``."""
        def run(*args, **kwargs):
            watch = Stopwatch()
            result = function(*args, **kwargs)
            mx.nd.waitall()
            self.parts[part] = self.parts.get(part, 0.0) + watch()
            return result
        return run

    def timed_callback(self, part, function):
        """``function`` made to add its time to ``part``, waiting for nothing (it runs
        inside an operator: a wait there would never end)."""
        def run(*args, **kwargs):
            watch = Stopwatch()
            try:
                return function(*args, **kwargs)
            finally:
                self.parts[part] = self.parts.get(part, 0.0) + watch()
        return run

    def timed_iter(self, part, iterable):
        """The items of ``iterable``, the wait for each added to ``part``."""
        iterator = iter(iterable)
        while True:
            watch = Stopwatch()
            item = next(iterator, None)
            self.parts[part] = self.parts.get(part, 0.0) + watch()
            if item is None:
                return
            yield item

    def start_round(self):
        self.parts = {}
        self._start = (Stopwatch(), self._cpu_seconds())

    def end_round(self, samples, steps, timed):
        """The :class:`Round` that ends, kept among :attr:`rounds` if ``timed``."""
        wall, cpu = self._start
        done = Round(samples, steps, wall(), self._cpu_seconds() - cpu, dict(self.parts))
        if timed:
            self.rounds.append(done)
        return done

    def _cpu_seconds(self):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime + (cpu_seconds(self.pids) if self.pids else 0)
