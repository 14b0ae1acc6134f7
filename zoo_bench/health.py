"""The cost of the training-health checks (:mod:`zoo.engine.health`): the same short
training twice in one process, with the checks off and on, alternating round for round
(``zoo benchmark-train --compare health``).

Both sides are the Trainer ``zoo train`` runs, on the same images, model and seeds, with its
divergence check; the other side adds the health hooks ``zoo train`` adds
(:func:`zoo.jobs.train.health_checks`). Each side's ``fit`` runs in its own thread, and the
two take turns at every epoch's end, so only one computes at a time. A round is an epoch of
``steps`` batches, its clock running from the epoch's first hook to its last (the checks'
end-of-epoch work included); the first ``warmup_rounds`` of each side are left out (the
first holds the initial-loss check's one extra forward pass, reported apart). Reports the
median round of each side, their ratio, the ratio of all timed rounds together (the
BatchNorm check runs in some rounds only: within its share of the run, and after the last),
and the checks' own time per step (their hooks timed inside the steps).
"""
import os
import statistics
import tempfile
import threading

from zoo_bench.timing import Stopwatch, environment, machine_line, print_line
from zoo_bench.train import OurSide, benchmark_images, build_our_model, our_trainer
from zoo_bench.train_parts import PartClock, SGD
from zoo.engine.hooks import DivergenceCheck

__all__ = ["HEALTH", "HealthBenchmarkResult", "benchmark_health"]

HEALTH = "health"
"""The part of a step spent in the health checks' hooks."""
TIMED_METHODS = ("before_epoch", "before_step", "after_step", "after_epoch")


class HealthBenchmarkResult:
    """Per side (``"off"``, ``"on"``) the timed :class:`Round` s; ``health_seconds`` the
    checks' own time over the timed rounds, ``first_round_health`` over the first round."""

    def __init__(self, off, on, health_seconds, first_round_health):
        self.off, self.on = off, on
        self.health_seconds, self.first_round_health = health_seconds, first_round_health

    @staticmethod
    def median_seconds(rounds):
        return statistics.median(r.seconds for r in rounds)

    @property
    def ratio(self):
        """Median round time with the checks over without."""
        return self.median_seconds(self.on) / self.median_seconds(self.off)

    @property
    def total_ratio(self):
        """All timed rounds with the checks over without."""
        return sum(r.seconds for r in self.on) / sum(r.seconds for r in self.off)

    @property
    def steps(self):
        return sum(r.steps for r in self.on)

    @property
    def health_share(self):
        """The checks' own time over the step time of their side."""
        return self.health_seconds / sum(r.seconds for r in self.on)


class Turns:
    """Two sides (0 and 1) that take turns: :meth:`pass_turn` lets the other side run and
    waits for this side's next turn (or for the other to be done)."""

    def __init__(self):
        self.condition = threading.Condition()
        self.turn, self.done = 0, [False, False]

    def wait(self, side):
        with self.condition:
            self.condition.wait_for(lambda: self.turn == side or self.done[1 - side])

    def pass_turn(self, side):
        with self.condition:
            self.turn = 1 - side
            self.condition.notify_all()
        self.wait(side)

    def finish(self, side):
        with self.condition:
            self.done[side], self.turn = True, 1 - side
            self.condition.notify_all()


def time_hooks(clock, hooks):
    """Make ``hooks``' methods (:data:`TIMED_METHODS`) add their time to ``clock``'s
    :data:`HEALTH` part, waiting for no operator (the step's own losses synchronise)."""
    for hook in hooks:
        for method in TIMED_METHODS:
            setattr(hook, method, clock.timed_callback(HEALTH, getattr(hook, method)))


def health_hooks(options, dataset, folder):
    """The hooks ``zoo train`` adds with its health checks on, for a run like this one."""
    from zoo.jobs.train import TrainOptions, health_checks
    run = TrainOptions(network=options.network, dataset="voc", data_root=folder,
                       val_split="", data_shape=options.data_shape,
                       batch_size=options.batch_size, lr=SGD["lr"],
                       epochs=options.warmup_rounds + options.rounds, output_dir=folder,
                       health=True)
    return health_checks(run, os.path.join(folder, "bench"), CycledRecords(dataset, options),
                         None, build_our_model(options))


class CycledRecords:
    """The benchmark's dataset as its loader sees it (``Cycled`` over the images, one round's
    samples): what the checks read of a dataset (its records by the batch's indices)."""

    def __init__(self, dataset, options):
        self.dataset = dataset
        self.records = [dataset.records[i % len(dataset.records)]
                        for i in range(options.samples_per_round)]

    def __len__(self):
        return len(self.records)

    def __getattr__(self, name):
        return getattr(self.dataset, name)


class RoundLast(OurSide):
    """:class:`OurSide`, placed after the other hooks: its round ends after theirs (the
    checks' end-of-epoch work is part of the step's cost)."""


def run_side(options, dataset, checks, interleave, folder):
    """Train one side; returns ``(its PartClock, the checks' first-round seconds)``."""
    clock = PartClock()
    model = build_our_model(options)
    first = {}

    def end_of_round():
        if not first:
            first["health"] = clock.parts.get(HEALTH, 0.0)
        interleave()

    side = RoundLast(clock, options.warmup_rounds, options.rounds, end_of_round, [], None)
    time_hooks(clock, checks)
    hooks = [DivergenceCheck(os.path.join(folder, model.name)), *checks, side]
    our_trainer(model, dataset, options, hooks, "fp32", profiled=False).fit()
    return clock, first.get("health", 0.0)


def alternate(options, dataset):
    """Both sides, taking turns; returns each side's :func:`run_side` (off, on). (Their
    losses may differ in the last bits: OpenMP settings are per thread.)"""
    turns = Turns()
    results, errors = [None, None], []
    with tempfile.TemporaryDirectory() as folder:
        checks = health_hooks(options, dataset, folder)

        def side(index, hooks):
            try:
                if index:
                    turns.wait(index)
                results[index] = run_side(options, dataset, hooks,
                                          lambda: turns.pass_turn(index), folder)
            except BaseException as err:  # noqa: B902 - re-raised in the main thread
                errors.append(err)
            finally:
                turns.finish(index)

        other = threading.Thread(target=side, args=(1, checks), name="zoo-bench-health-on")
        other.start()
        side(0, [])
        other.join()
    if errors:
        raise errors[0]
    return results


def benchmark_health(options, log=print_line):
    """Run the benchmark; each report line goes to ``log``. Returns a
    :class:`HealthBenchmarkResult`."""
    dataset = benchmark_images(options)
    log(machine_line(environment("MXNET_ENGINE_TYPE", "OMP_NUM_THREADS")))
    log("%s, data shape %s, batch %d, %d data threads, %d images of %dx%d cycled; %d rounds "
        "of %d steps per side after %d warm-up round(s), health checks off and on, alternating"
        % (options.network, options.data_shape or "config's", options.batch_size,
           options.data_threads, len(dataset), options.image_size, options.image_size,
           options.rounds, options.steps, options.warmup_rounds))
    watch = Stopwatch()
    (off, _), (on, first_health) = alternate(options, dataset)
    result = HealthBenchmarkResult(tuple(off.rounds), tuple(on.rounds),
                                   sum(r.parts.get(HEALTH, 0.0) for r in on.rounds),
                                   first_health)
    for name, rounds in (("health checks off", result.off), ("health checks on", result.on)):
        log("%-18s median round %.3f s (rounds %s)" % (
            name, result.median_seconds(rounds),
            ", ".join("%.3f" % r.seconds for r in rounds)))
    log("on / off: %.3fx the median round, %.3fx the timed rounds together; the checks' own "
        "time %.2f ms/step, %.2f%% of the step; first round (the initial-loss check's extra "
        "forward pass): %.1f ms; %.0f s in all" % (
            result.ratio, result.total_ratio, 1e3 * result.health_seconds / max(result.steps, 1),
            100 * result.health_share, 1e3 * result.first_round_health, watch()))
    return result
