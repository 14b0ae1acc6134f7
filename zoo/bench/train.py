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
import tempfile

from zoo.data import DetectionLoader, embedded, train_transform
from zoo.data.factory import open_dataset
from zoo.engine.hooks import DivergenceCheck, Hook
from zoo.engine.trainer import OptimizerOptions, Trainer, TrainerOptions, frozen_params
from zoo.config.registry import get_config
from zoo.model import get_model
from zoo.bench.timing import environment, machine_line, print_line
from zoo.bench.data import Cycled
from zoo.bench.gluoncv_recipes import RecipeProcess
from zoo.bench.train_parts import (GLUONCV_RECIPES, PARTS, SGD, TARGETS, PartClock, SideResult,
                                   TrainBenchmarkOptions, TrainBenchmarkResult)

__all__ = ["GLUONCV_RECIPES", "PARTS", "TARGETS", "TrainBenchmarkOptions", "benchmark_train"]


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
        machine_line("MXNET_ENGINE_TYPE=%s (GluonCV's recipe: ThreadedEnginePerDevice), %s"
                     % (os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice"),
                        environment("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))),
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
