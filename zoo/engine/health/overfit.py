"""``--overfit-batch STEPS``: can the model memorise one batch?

A model that cannot drive its loss down on a single fixed batch, seen over and over without
augmentation or weight decay, has a bug in its loss, its targets or its data, whatever a
full run would later show. The run's own loop trains on :class:`OneBatchLoader` (one fixed
batch, at most STEPS times); :class:`OverfitCheck` stops it as soon as the loss is below
:data:`~zoo.choices.OVERFIT_FRACTION` of its start, and fails it, in one line, if it never
gets there.
"""
import contextlib
import logging

from zoo.choices import OVERFIT_FRACTION
from zoo.engine.hooks import Hook
from zoo.engine.trainer import TrainingError

__all__ = ["CHECK", "OneBatchLoader", "OverfitCheck", "OverfitFailed"]

LOG = logging.getLogger("zoo.train")
CHECK = "overfit"
WINDOW = 3
"""Steps whose mean loss is compared (one step's loss alone may dip by chance: Faster
R-CNN samples its anchors and ROIs anew at every step)."""


class OverfitFailed(TrainingError):
    """The loss did not fall below :data:`~zoo.choices.OVERFIT_FRACTION` of its start on one
    batch."""


class OneBatchLoader:
    """The first batch of ``loader`` (a :class:`zoo.data.DetectionLoader`, epoch 0), given
    ``steps`` times an epoch until :meth:`finish` is called. ``items`` names what its
    samples are in the check's lines: whole images, or the tiles a tiled run trains."""

    def __init__(self, loader, steps, items="images"):
        with contextlib.closing(loader.epoch(0)) as batches:
            self.batch = next(batches)
        self.items = items
        self.batch_size, self.max_objects = loader.batch_size, loader.max_objects
        self.num_workers, self.steps, self.done = loader.num_workers, steps, False

    def __len__(self):
        return self.steps

    def epoch(self, epoch):
        for _ in range(self.steps):
            if self.done:
                return
            yield self.batch

    def finish(self):
        """End the epoch before its next batch."""
        self.done = True


class OverfitCheck(Hook):
    """Follows the loss on a :class:`OneBatchLoader`: finishes its epoch once the mean loss of
    the last :data:`WINDOW` steps is below :data:`~zoo.choices.OVERFIT_FRACTION` of the first
    step's, else raises :class:`OverfitFailed` at the epoch's end. ``summary`` is the
    outcome's line."""

    def __init__(self, loader):
        self.loader, self.steps, self.summary = loader, [], None

    @property
    def losses(self):
        """Each step's total loss."""
        return [sum(step.values()) for step in self.steps]

    def after_step(self, trainer, epoch, batch_index, losses):
        self.steps.append(dict(losses))
        if self.passed():
            self.loader.finish()

    def passed(self):
        losses = self.losses
        return (len(losses) > WINDOW and losses[0] > 0
                and recent_mean(losses) < OVERFIT_FRACTION * losses[0])

    def after_epoch(self, trainer, epoch, row):
        if self.steps and self.losses[0] == 0:
            raise OverfitFailed("--overfit-batch: the loss of the first step is 0: the batch "
                                "of the first %d %s of the training split gives the model "
                                "nothing to learn (no object?)" % (self.loader.batch_size,
                                                                   self.loader.items))
        figures = self.figures()
        if not self.passed():
            raise OverfitFailed(
                "--overfit-batch: %s, not below %d%% of its start: a model that cannot "
                "memorise one batch has a bug in its loss, its targets or its labels (if "
                "it fell steadily, raise the steps or --lr)"
                % (figures, 100 * OVERFIT_FRACTION))
        self.summary = "overfit-batch passed: %s" % figures
        trainer.health.result(CHECK, "ok", figures)
        LOG.info("%s", self.summary)

    def figures(self):
        """``the loss went from X to Y (Z% of its start; ...; each loss's start and end) in
        N steps on one batch of B images`` (or tiles)."""
        losses = self.losses
        terms = ", ".join("%s %.3g to %.3g" % (name, self.steps[0][name], recent_mean(
            [step[name] for step in self.steps])) for name in self.steps[0])
        return ("the loss went from %.4g to %.4g (%.1f%% of its start; mean of the last %d "
                "steps; %s) in %d steps on one batch of %d %s" % (
                    losses[0], recent_mean(losses), 100 * recent_mean(losses) / losses[0],
                    min(WINDOW, len(losses)), terms, len(losses), self.loader.batch_size,
                    self.loader.items))


def recent_mean(values):
    """The mean of the last :data:`WINDOW` values."""
    recent = values[-WINDOW:]
    return sum(recent) / len(recent)
