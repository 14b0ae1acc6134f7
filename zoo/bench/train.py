"""Samples/s of the zoo's whole training step, and beside it GluonCV's own training recipe
for the same network, in one run, round for round.

Ours is :class:`zoo.engine.trainer.Trainer` (what ``zoo train`` runs, with its per-step
divergence check) on the embedded shapes images through :class:`zoo.data.DetectionLoader`.
GluonCV's is its ``train_ssd.py`` / ``train_faster_rcnn.py`` loop, rebuilt from GluonCV's
pieces (:mod:`zoo.bench.gluoncv_recipes`), in a child process on MXNet's threaded engine
(ours runs in this process on the zoo's engine, or the one ``MXNET_ENGINE_TYPE`` names).
Both train with SGD (momentum 0.9, weight decay 5e-4) from random weights, on the same
JPEGs with the same number of data workers (our threads, GluonCV's processes).

The two alternate: one round (an epoch of ``steps`` batches) of ours, one of GluonCV's, and
so on; the first ``warmup_rounds`` of each side are left out. A round's clock runs from its
first batch request to its last update (GluonCV's worker processes refill their pipeline at
each epoch, as in its script). Each part of a step (``PARTS``) is timed by waiting for its
operators at its end (a no-op cost on the zoo's synchronous engine; under the threaded
engine it removes the overlap between parts): ``data`` is the wait for the next batch
(and its copy into NDArrays), ``targets`` are computed where each side computes them (ours
in the forward graph, GluonCV's in its data workers) and so appear in those parts.
"""
import contextlib
import dataclasses
import os
import re
import resource
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

import mxnet as mx

from zoo.data import DetectionLoader, embedded, train_transform
from zoo.data.factory import open_dataset
from zoo.engine.hooks import DivergenceCheck, Hook
from zoo.engine.trainer import OptimizerOptions, Trainer, TrainerOptions, frozen_params
from zoo.errors import OptionsError
from zoo.config.registry import get_config, list_models
from zoo.model import get_model
from zoo.bench.inference import print_line
from zoo.bench.data import Cycled, cpu_model, cpu_seconds

__all__ = ["GLUONCV_RECIPES", "PARTS", "PartClock", "Round", "SideResult", "TARGETS",
           "TrainBenchmarkOptions", "TrainBenchmarkResult", "benchmark_train"]

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
    compare: Optional[str] = "gluoncv"  # or None: ours only

    def __post_init__(self):
        if self.network not in list_models():
            raise OptionsError("unknown network %r; known: %s"
                               % (self.network, ", ".join(list_models())))
        if self.compare not in (None, "gluoncv"):
            raise OptionsError("compare must be gluoncv or None, got %r" % (self.compare,))
        if self.compare and self.network not in GLUONCV_RECIPES:
            raise OptionsError("no GluonCV recipe for %s; --compare gluoncv knows %s"
                               % (self.network, ", ".join(GLUONCV_RECIPES)))
        for name in ("batch_size", "steps", "rounds", "data_threads", "image_size",
                     "num_images", "data_shape", "max_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise OptionsError("%s must be >= 1, got %d" % (name, value))
        if self.warmup_rounds < 0:
            raise OptionsError("warmup_rounds must be >= 0, got %d" % self.warmup_rounds)
        if self.freeze:
            try:
                re.compile(self.freeze)
            except re.error as err:
                raise OptionsError("freeze %r is not a regular expression: %s"
                                   % (self.freeze, err)) from None

    @property
    def samples_per_round(self):
        return self.steps * self.batch_size


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
    ours: SideResult
    gluoncv: Optional[SideResult]   # None without the comparison


class PartClock:
    """Seconds per part of the steps of the current round of one side, and its rounds."""

    def __init__(self, pids=()):
        self.pids, self.parts, self.rounds = list(pids), {}, []
        self._start = None

    def timed(self, part, function):
        """``function`` made to add its time, its operators waited for, to ``part``."""
        def run(*args, **kwargs):
            start = time.perf_counter()
            result = function(*args, **kwargs)
            mx.nd.waitall()
            self.parts[part] = self.parts.get(part, 0.0) + time.perf_counter() - start
            return result
        return run

    def timed_callback(self, part, function):
        """``function`` made to add its time to ``part``, waiting for nothing (it runs
        inside an operator: a wait there would never end)."""
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.parts[part] = self.parts.get(part, 0.0) + time.perf_counter() - start
        return run

    def timed_iter(self, part, iterable):
        """The items of ``iterable``, the wait for each added to ``part``."""
        iterator = iter(iterable)
        while True:
            start = time.perf_counter()
            item = next(iterator, None)
            self.parts[part] = self.parts.get(part, 0.0) + time.perf_counter() - start
            if item is None:
                return
            yield item

    def start_round(self):
        self.parts = {}
        self._start = (time.perf_counter(), self._cpu_seconds())

    def end_round(self, samples, steps, timed):
        wall, cpu = self._start
        if timed:
            self.rounds.append(Round(samples, steps, time.perf_counter() - wall,
                                     self._cpu_seconds() - cpu, dict(self.parts)))

    def _cpu_seconds(self):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime + (cpu_seconds(self.pids) if self.pids else 0)


class OurSide(Hook):
    """Times the Trainer's parts and rounds (epochs); after each epoch runs ``interleave()``
    (the other side's round)."""

    def __init__(self, clock, warmup_rounds, interleave, checks):
        self.clock, self.warmup_rounds = clock, warmup_rounds
        self.interleave, self.checks = interleave, checks

    def before_train(self, trainer):
        clock, loader = self.clock, trainer.loader
        epochs = loader.epoch
        loader.epoch = lambda epoch: clock.timed_iter("data", epochs(epoch))
        trainer.data_batch = clock.timed("data", trainer.data_batch)
        trainer.model.training_losses = clock.timed("metrics", trainer.model.training_losses)
        for check in self.checks:
            check.after_step = clock.timed("logging", check.after_step)

    def before_epoch(self, trainer, epoch):
        if epoch == trainer.start_epoch:  # the Module is built once, before the first epoch
            module = trainer.module
            for part in ("forward", "backward", "update"):
                setattr(module, part, self.clock.timed(part, getattr(module, part)))
        self.clock.start_round()

    def after_epoch(self, trainer, epoch, row):
        self.clock.end_round(len(trainer.loader) * trainer.options.batch_size,
                             len(trainer.loader), epoch >= self.warmup_rounds)
        self.interleave()


def images_root(options):
    return options.data_root or os.path.join("output", "shapes_%d" % options.image_size)


def benchmark_images(options):
    """Our dataset of the embedded images, generated at ``image_size`` (once per size)."""
    embedded.generate(images_root(options), num_train=options.num_images, num_val=0,
                      image_size=options.image_size)
    return open_dataset("voc", images_root(options), "train")


def build_our_model(options):
    overrides = {"data_shape": options.data_shape or get_config(options.network)["data_shape"]}
    if options.max_size is not None:
        overrides["max_size"] = options.max_size
    return get_model(options.network, **overrides)


def our_trainer(model, dataset, options, hooks):
    """The Trainer ``zoo train`` would build for this model on these images, for
    ``warmup_rounds + rounds`` epochs of ``steps`` batches."""
    transform = train_transform(model.preprocessing())
    max_objects = max(1, max(len(r.class_ids) for r in dataset.records))
    loader = DetectionLoader(Cycled(dataset, options.samples_per_round), options.batch_size,
                             transform, shuffle=True, seed=0, num_workers=options.data_threads,
                             max_objects=max_objects)
    return Trainer(model, loader, TrainerOptions(
        epochs=options.warmup_rounds + options.rounds, batch_size=options.batch_size,
        freeze=options.freeze), OptimizerOptions(**SGD), hooks)


def trainable_params(trainer):
    """Parameters our Trainer updates (frozen ones and batch-norm statistics excluded)."""
    arg_params, _ = trainer.params()
    fixed = set(frozen_params(list(arg_params), trainer.options.freeze))
    return sum(array.size for name, array in arg_params.items() if name not in fixed)


def run_sides(options, dataset):
    """Both sides, alternating; returns ``(ours, theirs)`` :class:`SideResult`s."""
    model = build_our_model(options)
    # GluonCV's side trains at the same size, whatever its network's default.
    options = dataclasses.replace(options, data_shape=model.config["data_shape"],
                                  max_size=model.config.get("max_size", options.max_size))
    if not options.compare:
        return train_ours(model, dataset, options, lambda: None), None
    from zoo.bench.gluoncv_recipes import RecipeProcess
    recipe = RecipeProcess(GLUONCV_RECIPES[options.network], images_root(options), options,
                           SGD)
    try:
        ours = train_ours(model, dataset, options, recipe.run_round)
        return ours, recipe.result()
    finally:
        recipe.close()


@contextlib.contextmanager
def timed_target_operators(clock):
    """Time our Python target operators' forward as ``targets`` in the block."""
    from symbols import rcnn_targets
    operators = (rcnn_targets.RPNTarget, rcnn_targets.ProposalTarget)
    originals = [operator.forward for operator in operators]
    for operator, forward in zip(operators, originals):
        operator.forward = clock.timed_callback(TARGETS, forward)
    try:
        yield
    finally:
        for operator, forward in zip(operators, originals):
            operator.forward = forward


def train_ours(model, dataset, options, interleave):
    """Our side's :class:`SideResult`, ``interleave()`` run after each of its rounds."""
    clock = PartClock()
    with tempfile.TemporaryDirectory() as folder, timed_target_operators(clock):
        check = DivergenceCheck(os.path.join(folder, model.name))
        # First: its round ends before the other hooks' end-of-epoch work.
        side = OurSide(clock, options.warmup_rounds, interleave, [check])
        trainer = our_trainer(model, dataset, options, [side, check])
        trainer.fit()
    return SideResult("ours: zoo Trainer, %s" % model.name, trainable_params(trainer),
                      tuple(clock.rounds))


def header_lines(options, dataset):
    return [
        "machine: %d cores (%s), load average %.2f; MXNET_ENGINE_TYPE=%s (GluonCV's recipe: "
        "ThreadedEnginePerDevice), OMP_NUM_THREADS=%s, OMP_WAIT_POLICY=%s"
        % (len(os.sched_getaffinity(0)), cpu_model(), os.getloadavg()[0],
           os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice"),
           os.environ.get("OMP_NUM_THREADS"), os.environ.get("OMP_WAIT_POLICY")),
        "%s, data shape %s, batch %d, %d data workers each, %d images of %dx%d cycled; %d "
        "rounds of %d steps per side after %d warm-up round(s), alternating"
        % (options.network, options.data_shape or "config's", options.batch_size,
           options.data_threads, len(dataset), options.image_size, options.image_size,
           options.rounds, options.steps, options.warmup_rounds)]


def side_lines(side):
    rates = side.round_rates()
    return ["%-52s %8.3f samples/s (rounds %.3f-%.3f), step alone %.3f samples/s, %.2f CPU "
            "s/sample, %d trainable parameters"
            % (side.label, side.samples_per_s, min(rates), max(rates),
               side.step_samples_per_s, side.cpu_s_per_sample, side.trainable_params)]


def profile_lines(sides):
    """Milliseconds per step of each part, a column per side (``targets`` is part of
    ``forward``: see :data:`PARTS`)."""
    lines = ["%-10s" % "ms/step" + "".join("%14s" % name for name, _ in sides)]
    for part in PARTS:
        lines.append("%-10s" % part + "".join("%14.1f" % side.ms_per_step(part)
                                              for _, side in sides))
        if part == "forward":
            lines.append("%-10s" % (" " + TARGETS) + "".join(
                "%14.1f" % side.ms_per_step(TARGETS) for _, side in sides))
    lines.append("%-10s" % "step" + "".join(
        "%14.1f" % (1e3 * side.total("seconds") / side.total("steps")) for _, side in sides))
    return lines


def ratio_lines(ours, theirs):
    lines = ["ours / gluoncv: %.2fx samples/s, %.2fx the step alone (data excluded); "
             "gluoncv / ours: %.2fx CPU seconds per sample"
             % (ours.samples_per_s / theirs.samples_per_s,
                ours.step_samples_per_s / theirs.step_samples_per_s,
                theirs.cpu_s_per_sample / ours.cpu_s_per_sample)]
    if ours.trainable_params != theirs.trainable_params:
        lines.append("note: the sides train %d and %d parameters (%+d)" % (
            ours.trainable_params, theirs.trainable_params,
            ours.trainable_params - theirs.trainable_params))
    return lines


def benchmark_train(options, log=print_line):
    """Run the benchmark; each report line goes to ``log``. Returns a
    :class:`TrainBenchmarkResult`."""
    dataset = benchmark_images(options)
    for line in header_lines(options, dataset):
        log(line)
    ours, theirs = run_sides(options, dataset)
    sides = [("ours", ours)] + ([("gluoncv", theirs)] if theirs else [])
    for _, side in sides:
        for line in side_lines(side):
            log(line)
    for line in profile_lines(sides):
        log(line)
    if theirs:
        for line in ratio_lines(ours, theirs):
            log(line)
    return TrainBenchmarkResult(ours, theirs)
