"""The loss as training goes, judged against the run itself: spikes (against the trivial
predictor's loss and a moving median), plateaus ("stuck": no progress beyond the noise,
"slow": progress, but little), and losses that stay exactly 0 (every box vanished).

Per step: one median of the last :data:`SPIKE_WINDOW` losses and a few comparisons; the
plateau is judged once per epoch over the step losses kept (a float per step).
"""
import collections
import logging
import math

import numpy as np

from zoo.engine import module_adapter
from zoo.engine.hooks import Hook, stability_advice

__all__ = ["LossDynamicsCheck", "Plateau", "find_plateau"]

LOG = logging.getLogger("zoo.train")
SPIKE, PLATEAU, ZERO = "spikes", "plateau", "zero loss"

SPIKE_WINDOW = 50
"""Steps of the moving median a step's loss is judged against."""
SPIKE_OVER_MEDIAN = 3.0
SPIKE_OVER_TRIVIAL = 2.0
# A spike is a step loss over both: 3x the moving median and 2x the trivial predictor's (a
# model worse than predicting nothing). Healthy runs on the embedded data stayed under 1.7x
# their moving median and 1.3x the trivial loss after their first step (SSD, 48 steps of 4;
# Faster R-CNN C4, 32 steps of 2); `--lr 2` reached 25.6x the first loss.
SPIKE_MIN_HISTORY = 8
"""Steps of history a spike needs when no trivial loss is known (only the median)."""

BLOCK_MIN = 8
"""Smallest block of steps whose median the plateau search compares (a quarter epoch
above 32 steps per epoch)."""
NOISE_Z = 3.0
"""How many standard errors apart two block medians must be to end a plateau."""
TREND_Z = 2.0
"""How many standard errors the fall fitted over a plateau must exceed to make it "slow"
rather than "stuck" (a flat loss passes it 2% of the time)."""
PLATEAU_EPOCHS = 2
PLATEAU_SHARE = 1 / 3
PLATEAU_MIN_STEPS = 200
# A plateau is reported once it has lasted PLATEAU_EPOCHS epochs, PLATEAU_MIN_STEPS steps
# and PLATEAU_SHARE of the steps this start has run: a healthy run's curve flattens at its
# end, after the last lr drop, not for a third of the run: the quickstart recipe on 400
# embedded images (250 steps of 8) ended each epoch on a plateau of 12-36 steps. Shorter
# windows cry wolf: a healthy SSD run from scratch (batch 2, 24 steps) moved less than its
# noise.
ZERO_STEPS = 10
ZERO_SAMPLES = 20
# A loss term is reported once it has been exactly 0 for ZERO_STEPS consecutive steps and
# ZERO_SAMPLES consecutive samples: data with many images without objects, at batch 1, can
# give ten empty batches in a row, not twenty.


class Plateau:
    """The last ``steps`` steps, whose block medians all lie within the noise of their
    median: ``level`` (that median), ``noise`` (that tolerance, in loss units),
    ``change`` (the fall of a line fitted to the block medians over the plateau: positive
    is progress) and ``t`` (the fall over its standard error; over :data:`TREND_Z` the
    plateau is "slow", progress beyond the noise; else "stuck")."""

    def __init__(self, steps, level, noise, change, t):
        self.steps, self.level, self.noise, self.change, self.t = steps, level, noise, change, t

    @property
    def verdict(self):
        return "slow" if self.t > TREND_Z else "stuck"


def robust_sigma(values):
    """The standard deviation of ``values`` from their median absolute deviation."""
    return 1.4826 * float(np.median(np.abs(values - np.median(values))))


def find_plateau(values, block):
    """The :class:`Plateau` ending at the newest of ``values`` (step losses, oldest first),
    judged in blocks of ``block`` steps, or None with fewer than two blocks."""
    values = np.asarray(values, dtype=np.float64)
    count = len(values) // block
    if count < 2:
        return None
    blocks = values[len(values) - count * block:].reshape(count, block)
    medians = np.median(blocks, axis=1)
    # The spread of single steps around their block's median, and so of a block median.
    sigma = robust_sigma((blocks - medians[:, None]).ravel()) or 1e-12
    error = 1.2533 * sigma / math.sqrt(block)
    start = count - 1
    # Back while the older block's median lies within the noise of the plateau's so far.
    while start > 0 and abs(medians[start - 1] - np.median(medians[start:])) <= (
            NOISE_Z * error * math.sqrt(1 + 1 / (count - start))):
        start -= 1
    kept = medians[start:]
    level, tolerance = float(np.median(kept)), NOISE_Z * error
    change, t = 0.0, 0.0
    if len(kept) > 1:
        x = np.arange(len(kept)) - (len(kept) - 1) / 2
        slope = float((x * (kept - kept.mean())).sum() / (x * x).sum())
        change = -slope * (len(kept) - 1)
        t = -slope / (error / math.sqrt((x * x).sum()))
    return Plateau((count - start) * block, level, tolerance, change, t)


def next_lr_drop(trainer, epoch):
    """``"the next lr drop is at epoch 8"``, or that none is scheduled."""
    later = [e for e in trainer.optimizer_options.lr_steps if e > epoch + 1]
    if later and later[0] < trainer.options.epochs:
        return "the next lr drop is at epoch %g" % later[0]
    return "no lr drop is scheduled before the run ends (--lr-steps)"


class LossDynamicsCheck(Hook):
    """Spikes, plateaus and zero losses of the step losses of this start of the run."""
    only_rank0 = True

    def __init__(self):
        self.losses = []                    # total per step, this start
        self.recent = collections.deque(maxlen=SPIKE_WINDOW)
        self.zero_runs = {}                 # loss name -> consecutive steps at exactly 0
        self.zero_warned = False
        self.spike_epochs = set()           # epochs that warned of a spike
        self.plateau_reported = None        # step count when the current plateau was reported
        self.steps_per_epoch = 0

    def before_train(self, trainer):
        self.steps_per_epoch = len(trainer.loader)

    def after_step(self, trainer, epoch, batch_index, losses):
        total = sum(losses.values())
        if not math.isfinite(total):
            return  # the divergence check stops the run
        self.check_zero(trainer, epoch, batch_index, losses)
        self.check_spike(trainer, epoch, batch_index, total, losses)
        self.losses.append(total)
        self.recent.append(total)

    # -- zero losses ---------------------------------------------------------------------

    def check_zero(self, trainer, epoch, batch_index, losses):
        for name, value in losses.items():
            self.zero_runs[name] = self.zero_runs.get(name, 0) + 1 if value == 0 else 0
        needed = max(ZERO_STEPS, -(-ZERO_SAMPLES // trainer.options.batch_size))
        zero = [name for name, run in self.zero_runs.items() if run >= needed]
        if zero and not self.zero_warned:
            self.zero_warned = True
            trainer.health.warn(ZERO, (
                "%s %s been exactly 0 for %d steps (up to epoch %d, batch %d): no box reaches "
                "the loss; every box may vanish in the transform (boxes normalised to [0, 1] "
                "read as pixels?), or no anchor matches one: look at the first batch's "
                "picture, or run zoo check-data"
                % (" and ".join(zero), "has" if len(zero) == 1 else "have", needed,
                   epoch + 1, batch_index + 1)), epoch=epoch + 1)

    # -- spikes --------------------------------------------------------------------------

    def check_spike(self, trainer, epoch, batch_index, total, losses):
        trivial = trainer.health.trivial_loss
        if len(self.recent) < (1 if trivial else SPIKE_MIN_HISTORY):
            return
        median = float(np.median(self.recent))
        if not (total > SPIKE_OVER_MEDIAN * median
                and (trivial is None or total > SPIKE_OVER_TRIVIAL * trivial)):
            return
        if epoch in self.spike_epochs:
            return  # one warning an epoch
        self.spike_epochs.add(epoch)
        largest = max(losses, key=losses.get)
        trainer.health.warn(SPIKE, (
            "the step loss jumped to %.4g at epoch %d, batch %d (%s the largest term, %.4g): "
            "%.1fx the median %.4g of the last %d step%s%s; %s"
            % (total, epoch + 1, batch_index + 1, largest, losses[largest], total / median,
               median, len(self.recent), "" if len(self.recent) == 1 else "s",
               " and %.1fx the trivial predictor's %.4g" % (total / trivial, trivial)
               if trivial else "", stability_advice(trainer))),
            epoch=epoch + 1)

    # -- plateaus ------------------------------------------------------------------------

    def after_epoch(self, trainer, epoch, row):
        self.check_plateau(trainer, epoch)
        # A check that warned stays a warning (HealthReport keeps it).
        trainer.health.result(SPIKE, "ok")
        trainer.health.result(ZERO, "ok")

    def check_plateau(self, trainer, epoch):
        block = max(BLOCK_MIN, self.steps_per_epoch // 4)
        plateau = find_plateau(self.losses, block)
        enough = (plateau is not None
                  and plateau.steps >= max(PLATEAU_EPOCHS * self.steps_per_epoch,
                                           PLATEAU_MIN_STEPS)
                  and plateau.steps >= PLATEAU_SHARE * len(self.losses))
        if not enough:
            self.plateau_reported = None
            trainer.health.result(PLATEAU, "ok", "none")
            return
        # The same plateau, still going: reported once.
        if (self.plateau_reported is not None
                and len(self.losses) - plateau.steps < self.plateau_reported):
            return
        self.plateau_reported = len(self.losses)
        line = self.describe(trainer, epoch, plateau)
        if plateau.verdict == "stuck":
            trainer.health.warn(PLATEAU, line, epoch=epoch + 1)
        else:
            LOG.info("%s: %s", PLATEAU, line)
            trainer.health.result(PLATEAU, "ok", "slow for %d steps" % plateau.steps)

    def describe(self, trainer, epoch, plateau):
        """The plateau in one line: its length, level and noise, the lr and the schedule,
        and the way out."""
        steps = plateau.steps
        epochs = steps / max(self.steps_per_epoch, 1)
        trivial = trainer.health.trivial_loss
        against = (" (%.2fx the trivial predictor's loss)" % (plateau.level / trivial)
                   if trivial else "")
        drop = next_lr_drop(trainer, epoch)
        if plateau.verdict == "slow":
            what = ("the loss falls slowly: %.3g in %d steps (%.3g epochs) to %.4g%s, beyond "
                    "the noise but each block within +-%.3g of the last"
                    % (plateau.change, steps, epochs, plateau.level, against, plateau.noise))
            hint = "a higher --lr may go faster"
        else:
            what = ("the loss has been stuck for %d steps (%.3g epochs) at %.4g%s: it moved "
                    "%+.3g, within the noise of +-%.3g"
                    % (steps, epochs, plateau.level, against, -plateau.change, plateau.noise))
            if trivial and plateau.level > 0.9 * trivial:
                hint = ("the model predicts no better than equal scores and zero offsets: "
                        "raise --lr, check --freeze and the data (the first batch's picture)")
            elif drop.startswith("the next"):
                hint = "the lr drop may resume progress; if it is far, bring it closer"
            else:
                hint = "more epochs at this lr will not help: lower it (--lr-steps) or stop"
        return "%s; lr %.3g, %s; %s" % (what, module_adapter.current_lr(trainer.module), drop,
                                       hint)
