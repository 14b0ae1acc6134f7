"""The parts of ``zoo benchmark-train`` that both sides share (:mod:`zoo_bench.train`, ours,
and :mod:`zoo_bench.gluoncv_recipes`, GluonCV's): the rounds and results of a side, and the
clock that times each part of a step; its options and the recipes it knows are
:class:`zoo_bench.options.TrainBenchmarkOptions` and ``GLUONCV_RECIPES``."""
import resource
from dataclasses import dataclass, field
from typing import Optional

import mxnet as mx

from zoo_bench.data import cpu_seconds
from zoo_bench.timing import Stopwatch

__all__ = ["PARTS", "PartClock", "Round", "SGD", "SideResult", "TARGETS", "TrainBenchmarkResult"]

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
