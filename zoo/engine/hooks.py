"""What the training loop (:class:`zoo.engine.trainer.Trainer`) does besides updating:
divergence checks, validation, checkpoints, the CSV log, the progress bar and batch-norm
averaging across workers. :func:`default_hooks` puts them in the order they must run."""
import collections
import contextlib
import csv
import glob
import logging
import math
import os
import time

import numpy as np

from zoo import artifact
from zoo.errors import DataError
from zoo.inference.detector import Detector
from zoo.inference.evaluation import dataset_rows, voc_scores
from zoo.inference.tiles import tiles_record
from zoo.engine import module_adapter
from zoo.engine.trainer import OutputFolderInUse, TrainingDiverged, TrainingError
from zoo.progress import progress_bar
from zoo.runfiles import log_path

__all__ = ["CSVLog", "Checkpointer", "DivergenceCheck", "Hook", "LOG", "ProgressBar",
           "StatisticsAveraging", "Validation", "default_hooks", "last_checkpoint_note",
           "stability_advice"]

LOG = logging.getLogger("zoo.train")
# A loss this many times the reference (or 1, if larger) counts as exploded: the median of
# the last DIVERGENCE_WINDOW steps, or the trivial predictor's loss if lower (an absurd
# first loss must not become the yardstick).
DIVERGENCE_FACTOR = 1e3
DIVERGENCE_WINDOW = 50


def last_checkpoint_note(prefix):
    """What a stopped run says about its checkpoints at ``prefix``, e.g. ``last complete
    checkpoint: out/ssd-0002``."""
    epoch = artifact.latest_epoch(prefix)
    return ("last complete checkpoint: %s-%04d" % (prefix, epoch) if epoch is not None
            else "no checkpoint was written yet")


class Hook:
    """A hook of the training loop; every method does nothing unless overridden.

    ``after_epoch`` may return a dict of columns to add to the epoch's row (later hooks
    and the returned rows see them). ``only_rank0`` hooks run on rank 0 of a cluster only.
    """
    only_rank0 = False

    def before_train(self, trainer):
        pass

    def before_epoch(self, trainer, epoch):
        pass

    def before_step(self, trainer, epoch, batch_index, batch):
        """``batch``: the loader's :class:`zoo.data.loader.Batch` (images as the network
        gets them, label rows normalised to [0, 1] of each image's valid region), before
        its forward pass."""

    def after_step(self, trainer, epoch, batch_index, losses):
        pass

    def after_epoch(self, trainer, epoch, row):
        return None

    def after_train(self, trainer):
        pass


class StatisticsAveraging(Hook):
    """At each epoch's end, replace every worker's batch-norm running statistics by their
    mean over all workers and devices, so that all workers hold the same model and rank 0's
    checkpoint reflects every shard. Synchronous dist kvstores only (a synchronous server
    answers a push-pull with the sum of this round's pushes); collective: every worker must
    have this hook."""

    def __init__(self):
        self.keys = None

    def after_epoch(self, trainer, epoch, row):
        module = trainer.module
        statistics = module_adapter.aux_arrays(module)
        if not (trainer.synchronous and statistics):
            return
        kvstore = module_adapter.kvstore(module)
        if self.keys is None:
            self.keys = ["zoo:aux:" + name for name, _ in statistics]
            kvstore.init(self.keys, [arrays[0] for _, arrays in statistics])
        count = trainer.num_workers * len(module_adapter.module_contexts(module))
        for i, (key, (_, arrays)) in enumerate(zip(self.keys, statistics)):
            kvstore.pushpull(key, arrays, out=arrays, priority=-i)
            for array in arrays:
                array /= count
        module_adapter.mark_params_changed(module)


def stability_advice(trainer):
    """``"lower --lr (now 0.01), add --clip-gradient or --warmup-epochs"``: what steadies a
    run that blew up, naming only the flags it can still add or lower (a run already given
    --clip-gradient is told to lower it, not to add it)."""
    options = trainer.optimizer_options
    advice = ["lower --lr (now %.3g)" % module_adapter.current_lr(trainer.module)]
    if options.clip_gradient:
        advice.append("lower --clip-gradient (now %g)" % options.clip_gradient)
    if not options.warmup_epochs:
        advice.append("add --warmup-epochs")
    if not options.clip_gradient:
        advice.append("add --clip-gradient")
    return ", ".join(advice[:-1]) + " or " + advice[-1]


class DivergenceCheck(Hook):
    """Stops training with :class:`TrainingDiverged` on a NaN/inf loss, a loss a thousand
    times the run's own (the median of its last steps, or the trivial predictor's loss where
    the health checks measured a higher one; the first step is judged by those checks). The
    larger of the two: a hard stop must not kill a run whose own scale is far above the
    trivial loss and that recovers (an FPN's box loss at its start, thousands for a step);
    the health checks' spike warning is the sensitive judge, against the smaller.
    or non-finite parameters at an epoch's end (checked before any checkpoint of that epoch
    is written). ``prefix`` is where checkpoints go.

    The message names as the last good checkpoint only one whose loss was evaluated and
    found sane: the first step of an epoch computes its loss with the parameters the
    previous epoch's checkpoint holds. A checkpoint saved after the update that blew up
    has finite but exploded parameters, and is never named so."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.recent = collections.deque(maxlen=DIVERGENCE_WINDOW)
        self.good_epoch = None  # the newest checkpoint whose loss was evaluated sane

    def after_step(self, trainer, epoch, batch_index, losses):
        total = sum(losses.values())
        reference = self.reference(trainer)
        if math.isfinite(total) and (reference is None
                                     or total <= DIVERGENCE_FACTOR * max(reference, 1.0)):
            self.recent.append(total)
            if batch_index == 0 and epoch > 0:
                self.good_epoch = epoch  # this step's loss was the checkpoint's of epoch
            return
        raise self.diverged(trainer, "loss %s at epoch %d, batch %d (%s)" % (
            "is not finite" if not math.isfinite(total) else
            "exploded to %.3g, over %.3g (%gx the run's %.3g)" % (
                total, DIVERGENCE_FACTOR * max(reference, 1.0), DIVERGENCE_FACTOR, reference),
            epoch + 1, batch_index + 1, ", ".join("%s %.4g" % kv for kv in losses.items())))

    def reference(self, trainer):
        """The loss an explosion is measured against (None at the first step)."""
        if not self.recent:
            return None
        median = float(np.median(self.recent))
        trivial = trainer.health.trivial_loss
        return max(median, trivial) if trivial else median

    def after_epoch(self, trainer, epoch, row):
        # A full scan of the parameters per step would cost a device sync each; a bad update
        # shows in the next step's loss, and the scan here guards the checkpoint.
        arg_params, aux_params = trainer.params()
        for name, array in {**arg_params, **aux_params}.items():
            if not np.isfinite(array.asnumpy()).all():
                raise self.diverged(trainer, "parameter %s is not finite after epoch %d"
                                    % (name, epoch + 1))

    def diverged(self, trainer, what):
        advice = stability_advice(trainer)
        return TrainingDiverged("%s; %s. %s%s." % (what, self.good_note(), advice[0].upper(),
                                                   advice[1:]))

    def good_note(self):
        """Which checkpoint to resume from, if one is known to be good."""
        complete = artifact.epochs(self.prefix)
        if not complete:
            return "no checkpoint was written yet"
        if self.good_epoch in complete:
            return "the last good checkpoint is %s" % artifact.epoch_files(
                self.prefix, self.good_epoch).params
        return ("no checkpoint is known to be good (%s was saved but its loss was never "
                "evaluated)" % artifact.epoch_files(self.prefix, complete[-1]).params)


class Validation(Hook):
    """VOC07 mAP on ``dataset`` every ``interval`` epochs and after the last one, as the
    row's ``val_map``; batches as in training, decoded by the loader's threads. With
    ``tiles`` (a :class:`zoo.inference.tiles.Tiling`, a run on tiles) each image is scored
    whole, run whole and in those tiles as ``zoo detect --tiles`` runs it. The hooks
    after it find the epoch's detections in ``detections`` (one array of rows ``[class,
    score, x1, y1, x2, y2]`` normalised to the image per image of ``dataset``, None on an
    epoch without validation).

    A validation image that cannot be read stops training only once the epoch's other
    hooks have run (see :meth:`Trainer.stop`): the epoch's checkpoint is still written."""
    only_rank0 = True

    def __init__(self, dataset, interval=1, tiles=None):
        if interval < 1:
            raise ValueError("validation interval must be >= 1, got %d" % interval)
        self.dataset, self.interval, self.tiles = dataset, interval, tiles
        self.detections = None

    def after_epoch(self, trainer, epoch, row):
        self.detections = None
        if (epoch + 1) % self.interval and epoch + 1 != trainer.options.epochs:
            return None
        arg_params, aux_params = trainer.params()
        try:
            detector = Detector(trainer.model, arg_params, aux_params,
                                data_threads=trainer.loader.num_workers)
            detections = dataset_rows(detector, self.dataset, trainer.options.batch_size,
                                      progress=False, tiles=self.tiles)
            result = voc_scores(self.dataset, detections)
        except DataError as err:
            trainer.stop(TrainingError("validation after epoch %d failed, training stopped "
                                       "once the epoch was saved: %s" % (epoch + 1, err)))
            return None
        val_map = result["voc07"]["mAP"]
        self.detections = detections
        LOG.info("epoch %d: validation VOC07 mAP %.4f", epoch + 1, val_map)
        return {"val_map": val_map}


class Checkpointer(Hook):
    """Writes the artifact of every epoch at ``prefix`` (parameters, optimizer state, the
    training options, the best validation so far), then keeps the newest ``keep_last``
    epochs and the best one. ``run`` is a JSON-able description of the run (data, flags)
    stored with the options; ``tiles`` the :class:`zoo.inference.tiles.Tiling` it trains
    on (None: whole photos), which the artifact records for detection.

    Before training it removes what a killed save left, and refuses a folder that already
    holds checkpoints unless the run resumes or ``overwrite`` is set (which removes this
    prefix's old epochs).
    """
    only_rank0 = True

    def __init__(self, prefix, keep_last=3, overwrite=False, run=None, tiles=None):
        if keep_last < 1:
            raise ValueError("keep_last must be >= 1, got %d" % keep_last)
        self.prefix, self.keep_last, self.overwrite = prefix, keep_last, overwrite
        self.run, self.tiles = run, tiles
        self.best = None

    def before_train(self, trainer):
        folder = os.path.dirname(self.prefix) or "."
        os.makedirs(folder, exist_ok=True)
        artifact.clean_temporary_files(self.prefix)
        resumed = trainer.resumed
        if resumed is not None:
            # A best epoch of another prefix names no file here.
            if resumed.prefix == self.prefix:
                self.best = resumed.meta.get("best")
            return
        found = sorted(glob.glob(os.path.join(glob.escape(folder), "*-[0-9][0-9][0-9][0-9].json")))
        if found and not self.overwrite:
            raise OutputFolderInUse(
                "%s already holds checkpoints (%s): pass --resume auto to continue that run "
                "(or --resume PREFIX), or --overwrite to start a new one there"
                % (folder, os.path.basename(found[0])))
        self._remove_all_epochs()

    def _remove_all_epochs(self):
        for epoch in artifact.epochs(self.prefix):
            for path in artifact.epoch_files(self.prefix, epoch):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)

    def after_epoch(self, trainer, epoch, row):
        val_map = row.get("val_map")
        if val_map is not None and (self.best is None or val_map > self.best["value"]):
            self.best = {"epoch": epoch + 1, "metric": "voc07_map", "value": val_map}
        arg_params, aux_params = trainer.params()
        try:
            artifact.save(self.prefix, epoch + 1, trainer.model, arg_params, aux_params,
                          best=self.best, training=dict(trainer.training_record(), run=self.run,
                                                        health=trainer.health.record()),
                          optimizer_state=module_adapter.optimizer_state(trainer.module),
                          tiles=tiles_record(self.tiles))
        except artifact.ArtifactError as err:
            # The disk is full or the folder not writable: the older epochs are untouched.
            raise TrainingError("epoch %d could not be saved: %s; %s" % (
                epoch + 1, err, last_checkpoint_note(self.prefix))) from None
        artifact.prune(self.prefix, self.keep_last,
                       keep=(self.best["epoch"],) if self.best else ())


class CSVLog(Hook):
    """Appends each epoch's row to the CSV file ``path`` (a new run starts it afresh; a
    resumed one keeps the rows up to the epoch it resumes from)."""
    only_rank0 = True

    def __init__(self, path, loss_names):
        self.path = path
        self.columns = ["epoch", "lr", "samples_per_sec", *loss_names, "val_map"]

    def before_train(self, trainer):
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        rows = []
        if trainer.start_epoch and os.path.exists(self.path):
            with open(self.path, newline="") as stream:
                rows = [row for row in csv.DictReader(stream)
                        if int(row["epoch"]) <= trainer.start_epoch]
        with open(self.path, "w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=self.columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)

    def after_epoch(self, trainer, epoch, row):
        try:
            with open(self.path, "a", newline="") as stream:
                csv.DictWriter(stream, fieldnames=self.columns,
                               extrasaction="ignore").writerow(row)
        except OSError as err:
            # After the checkpoint: the epoch is saved, only its log line is lost.
            raise TrainingError("%s: cannot be written (%s); the checkpoint of epoch %d is "
                                "saved" % (self.path, err.strerror or err, epoch + 1)) from None


class ProgressBar(Hook):
    """A progress bar per epoch with the speed and the running mean losses."""
    only_rank0 = True

    FIRST_STEP = "first step: MXNet binds the graph and runs it once (minutes for a big model)"

    def __init__(self):
        self.bar, self.totals, self.start = None, None, None
        self.stepped = False

    def before_epoch(self, trainer, epoch):
        self.bar = progress_bar(total=len(trainer.loader), unit="batch", leave=False,
                                desc="epoch %d/%d" % (epoch + 1, trainer.options.epochs))
        self.totals, self.start = dict.fromkeys(trainer.model.loss_names, 0.0), time.time()
        if not self.stepped:
            # Until the first step ends the bar would show 0 batches and no speed for as
            # long as binding takes (6.5 minutes for an FPN ResNet-50 on 2 cores).
            self.bar.set_postfix_str(self.FIRST_STEP)

    def after_step(self, trainer, epoch, batch_index, losses):
        steps = batch_index + 1
        for name, value in losses.items():
            self.totals[name] += value
        samples = steps * trainer.options.batch_size * trainer.num_workers
        self.bar.set_postfix({"samples/s": "%.1f" % (samples / max(time.time() - self.start,
                                                                   1e-9)),
                              **{k: "%.3f" % (v / steps) for k, v in self.totals.items()}},
                             refresh=False)
        self.bar.update()
        self.stepped = True

    def after_epoch(self, trainer, epoch, row):
        self.bar.close()


def default_hooks(model, output_dir, *, val_dataset=None, val_interval=1, keep_last=3,
                  overwrite=False, progress=True, run=None, checks=(), tiles=None):
    """The hooks of a training run writing to ``output_dir`` (prefix ``model.name``), in the
    order they must run: statistics averaged before anything reads them, the divergence
    check before validation and saving, the best validation known before the checkpoint
    records it, the folder check before the log is started. ``checks`` (the health checks,
    :mod:`zoo.engine.health`) run after validation and before the checkpoint, which records
    what they found. ``tiles``: the :class:`zoo.inference.tiles.Tiling` a run on tiles
    validates in and records."""
    prefix = os.path.join(output_dir, model.name)
    hooks = [StatisticsAveraging(), DivergenceCheck(prefix)]
    if val_dataset is not None:
        hooks.append(Validation(val_dataset, val_interval, tiles))
    hooks += list(checks)
    hooks += [Checkpointer(prefix, keep_last, overwrite, run, tiles),
              CSVLog(log_path(prefix), model.loss_names)]
    if progress:
        hooks.append(ProgressBar())
    return hooks
