"""Samples/s of the zoo's whole training step, in fp32 and bf16 (``dtypes``), and beside
each GluonCV's own training recipe for the same network, in one run, round for round.

Ours is :class:`zoo.engine.trainer.Trainer` (what ``zoo train`` runs, with its per-step
divergence check) on the embedded shapes images through :class:`zoo.data.DetectionLoader`.
GluonCV's is its ``train_ssd.py`` / ``train_faster_rcnn.py`` loop, rebuilt from GluonCV's
pieces (:mod:`zoo_bench.gluoncv_recipes`), in a child process on MXNet's threaded engine
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

Our sides run one after the other (fp32's rounds alternating with GluonCV's, then bf16's
with GluonCV's, one recipe process throughout). Each of ours then runs one more round timed
operator by operator (:mod:`zoo_bench.train_kernels`): the share of the step in bf16 and fp32
layers, casts, targets, losses and the optimizer, and the layers' GFLOP/s against the
machine's matmul peak of their precision, each probe the best of ``peak_probes``.
"""
import contextlib
import dataclasses
import os
import tempfile

from zoo.data import DetectionLoader, embedded, train_transform
from zoo.data.factory import open_dataset
from zoo.engine.hooks import DivergenceCheck, Hook
from zoo.engine.precision import resolve_dtype
from zoo.engine.trainer import OptimizerOptions, Trainer, TrainerOptions, frozen_params
from zoo.config.registry import get_config
from zoo.model import get_model
from zoo_bench import train_kernels
from zoo_bench.inference import best_of, bf16_matmul_peak_gflops, matmul_peak_gflops
from zoo_bench.timing import environment, machine_line, print_line
from zoo_bench.train_kernels import KernelClock, layer_flops
from zoo_bench.data import Cycled
from zoo_bench.gluoncv_recipes import RecipeProcess
from zoo_bench.options import GLUONCV_RECIPES, TrainBenchmarkOptions  # defined without MXNet
from zoo_bench.train_parts import (PARTS, SGD, TARGETS, PartClock, SideResult,
                                   TrainBenchmarkResult)

__all__ = ["GLUONCV_RECIPES", "PARTS", "TARGETS", "TrainBenchmarkOptions", "benchmark_train"]


class OurSide(Hook):
    """Times the Trainer's parts and rounds (epochs); after each timed epoch runs
    ``interleave()`` (the other side's round). The epoch after the timed ones is timed
    operator by operator (``kernels``, a :class:`~zoo_bench.train_kernels.KernelClock`;
    None: no such epoch), its :class:`~zoo_bench.train_parts.Round` kept as :attr:`profiled`."""

    def __init__(self, clock, warmup_rounds, rounds, interleave, checks, kernels):
        self.clock, self.warmup_rounds, self.rounds = clock, warmup_rounds, rounds
        self.interleave, self.checks, self.kernels = interleave, checks, kernels
        self.profiled, self.losses = None, None

    def profiling(self, epoch):
        return self.kernels is not None and epoch == self.warmup_rounds + self.rounds

    def before_train(self, trainer):
        clock, loader = self.clock, trainer.loader
        epochs = loader.epoch
        loader.epoch = lambda epoch: clock.timed_iter("data", epochs(epoch))
        trainer.data_batch = clock.timed("data", trainer.data_batch)
        self.losses = trainer.model.training_losses
        trainer.model.training_losses = clock.timed("metrics", self.losses)
        for check in self.checks:
            check.after_step = clock.timed("logging", check.after_step)

    def after_train(self, trainer):
        # The model is shared by our sides: the next one times its own metrics.
        trainer.model.training_losses = self.losses

    def before_epoch(self, trainer, epoch):
        module = trainer.module
        if epoch == trainer.start_epoch:  # the Module is built once, before the first epoch
            for part in ("forward", "backward", "update"):
                setattr(module, part, self.clock.timed(part, getattr(module, part)))
        if self.profiling(epoch):
            self.kernels.install(module)
            forward = module.forward

            def restarted(*args, **kwargs):  # the operators' clock starts with each step
                self.kernels.restart()
                return forward(*args, **kwargs)
            module.forward = restarted
        self.clock.start_round()

    def after_epoch(self, trainer, epoch, row):
        done = self.clock.end_round(len(trainer.loader) * trainer.options.batch_size,
                                    len(trainer.loader),
                                    self.warmup_rounds <= epoch and not self.profiling(epoch))
        if self.profiling(epoch):
            self.profiled = done
        else:
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


def our_trainer(model, dataset, options, hooks, dtype, profiled=True):
    """The Trainer ``zoo train --dtype DTYPE`` would build for this model on these images,
    for ``warmup_rounds + rounds`` epochs of ``steps`` batches and, if ``profiled``, one
    more profiled."""
    transform = train_transform(model.preprocessing())
    max_objects = max(1, max(len(r.class_ids) for r in dataset.records))
    loader = DetectionLoader(Cycled(dataset, options.samples_per_round), options.batch_size,
                             transform, shuffle=True, seed=0, num_workers=options.data_threads,
                             max_objects=max_objects)
    return Trainer(model, loader, TrainerOptions(
        epochs=options.warmup_rounds + options.rounds + int(profiled),
        batch_size=options.batch_size,
        freeze=options.freeze, dtype=dtype), OptimizerOptions(**SGD), hooks)


def trainable_params(trainer):
    """Parameters our Trainer updates (frozen ones and batch-norm statistics excluded)."""
    arg_params, _ = trainer.params()
    fixed = set(frozen_params(list(arg_params), trainer.options.freeze))
    return sum(array.size for name, array in arg_params.items() if name not in fixed)


def run_sides(options, dataset):
    """Our side in each precision, then the next, each alternating round for round with
    GluonCV's (one recipe process throughout: its rounds beside each of ours count);
    returns ``([ours...], theirs)`` :class:`SideResult`s."""
    model = build_our_model(options)
    # GluonCV's side trains at the same size, whatever its network's default.
    options = dataclasses.replace(options, data_shape=model.config["data_shape"],
                                  max_size=model.config.get("max_size", options.max_size))
    if not options.compare:
        return [train_ours(model, dataset, options, lambda: None, dtype)
                for dtype in options.precisions()], None
    recipe = RecipeProcess(GLUONCV_RECIPES[options.network], images_root(options), options,
                           SGD)
    try:
        ours = [train_ours(model, dataset, options, recipe.run_round, dtype)
                for dtype in options.precisions()]
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


def train_ours(model, dataset, options, interleave, dtype):
    """Our side's :class:`SideResult` in precision ``dtype`` (fp32 or bf16),
    ``interleave()`` run after each of its timed rounds."""
    clock = PartClock()
    with tempfile.TemporaryDirectory() as folder, timed_target_operators(clock):
        check = DivergenceCheck(os.path.join(folder, model.name))
        kernels = KernelClock()
        # First: its round ends before the other hooks' end-of-epoch work.
        side = OurSide(clock, options.warmup_rounds, options.rounds, interleave, [check],
                       kernels)
        trainer = our_trainer(model, dataset, options, [side, check], dtype)
        trainer.fit()
    flops = layer_flops(model, options.batch_size, trainer.loader.max_objects)
    return SideResult("ours: zoo Trainer, %s, %s" % (model.name, dtype),
                      trainable_params(trainer), tuple(clock.rounds),
                      kernels.profile(side.profiled, flops))


def header_lines(options, dataset):
    return [
        machine_line("MXNET_ENGINE_TYPE=%s (GluonCV's recipe: ThreadedEnginePerDevice), %s"
                     % (os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice"),
                        environment("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))),
        "%s, data shape %s, batch %d, %d data workers each, %d images of %dx%d cycled; %d "
        "rounds of %d steps per side after %d warm-up round(s), alternating; ours in %s"
        % (options.network, options.data_shape or "config's", options.batch_size,
           options.data_threads, len(dataset), options.image_size, options.image_size,
           options.rounds, options.steps, options.warmup_rounds, precision_note(options))]


def precision_note(options):
    """``fp32, then bf16 (auto: this CPU has avx512_bf16)``: our sides' precisions."""
    notes = []
    for dtype in options.dtypes:
        precision, note = resolve_dtype(dtype)
        notes.append(precision + (" (%s)" % note if note else ""))
    return ", then ".join(dict.fromkeys(notes))


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


def ratio_lines(ours, theirs, names=("ours", "gluoncv")):
    """How side ``ours`` compares with side ``theirs`` (named ``names``)."""
    lines = ["%s / %s: %.2fx samples/s, %.2fx the step alone (data excluded); "
             "%s / %s: %.2fx CPU seconds per sample"
             % (names + (ours.samples_per_s / theirs.samples_per_s,
                         ours.step_samples_per_s / theirs.step_samples_per_s)
                + names[::-1] + (theirs.cpu_s_per_sample / ours.cpu_s_per_sample,))]
    if ours.trainable_params != theirs.trainable_params:
        lines.append("note: the sides train %d and %d parameters (%+d)" % (
            ours.trainable_params, theirs.trainable_params,
            ours.trainable_params - theirs.trainable_params))
    return lines


def side_names(options):
    """Our sides' column names: ``ours``, or ``ours fp32``, ``ours bf16`` with several."""
    precisions = options.precisions()
    return ["ours" if len(precisions) == 1 else "ours " + dtype for dtype in precisions]


def comparison_lines(named, theirs):
    """Each of our sides against GluonCV's (if run), and each against our first."""
    lines = []
    for name, side in named:
        lines += ratio_lines(side, theirs, (name, "gluoncv")) if theirs else []
    for name, side in named[1:]:
        lines += ratio_lines(side, named[0][1], (name, named[0][0]))
    return lines


def measured_peaks(options):
    """``{"fp32": GFLOP/s, "bf16": ...}`` of our sides' precisions, each the best of
    ``peak_probes`` probes (empty with none)."""
    probes = {"fp32": matmul_peak_gflops, "bf16": bf16_matmul_peak_gflops}
    if not options.peak_probes:
        return {}
    return {precision: best_of(probes[precision], options.peak_probes,
                               seconds=options.peak_seconds)
            for precision in options.precisions()}


def kernel_lines(options, named):
    """Where our sides' steps go by precision, against the machine's measured peaks."""
    peaks = measured_peaks(options)
    return (train_kernels.peak_lines(peaks, options.peak_probes)
            + train_kernels.lines([(name, side.kernels) for name, side in named], peaks))


def benchmark_train(options, log=print_line):
    """Run the benchmark; each report line goes to ``log``. Returns a
    :class:`TrainBenchmarkResult`."""
    dataset = benchmark_images(options)
    for line in header_lines(options, dataset):
        log(line)
    ours, theirs = run_sides(options, dataset)
    named = list(zip(side_names(options), ours))
    sides = named + ([("gluoncv", theirs)] if theirs else [])
    for _, side in sides:
        for line in side_lines(side):
            log(line)
    for line in profile_lines(sides) + comparison_lines(named, theirs):
        log(line)
    for line in kernel_lines(options, named):
        log(line)
    return TrainBenchmarkResult(ours[0], theirs, dict(zip(options.precisions(), ours)))
