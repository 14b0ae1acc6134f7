"""Is this run keeping up with another one, and which classes does it confuse?

:class:`ReferenceCheck` (``--reference RUN``) compares each epoch's loss and validation mAP
with those of the same epoch in a reference run's CSV log (what ``zoo train`` writes as
``<prefix>-log.csv``, or a published run's in that format) and warns once per figure when
this run falls behind by more than a band: the "50% where the original reached 78%" story,
told at the epoch it starts instead of at the end.

:class:`ConfusionMatrix` writes, at each validation, which class each validation object was
detected as (detections matched to the ground truth by IoU whatever their class), to
``<prefix>-confusion.csv`` and ``.png``, and warns when classes are swapped.
"""
import csv
import glob
import logging
import os

import numpy as np

from symbols.boxes import iou
from zoo.atomicfile import atomic_write
from zoo.data.conventions import pixel_offset
from zoo.engine.hooks import Hook, Validation
from zoo.errors import DataError, OptionsError
from zoo.inference.evaluation import in_pixels
from zoo.runfiles import log_path

__all__ = ["ConfusionMatrix", "LOSS_BAND", "MAP_BAND", "MAP_FLOOR", "ReferenceCheck",
           "confusion_matrix", "confusion_path", "reference_log", "swapped_classes"]

LOG = logging.getLogger("zoo.train")
LOSS_BAND = 0.25
"""This run's loss is behind when above the reference's by more than this fraction of it."""
MAP_BAND, MAP_FLOOR = 0.1, 0.03
"""This run's mAP is behind when below the reference's by more than this fraction of it,
and by more than the floor (early mAPs are small and noisy)."""
SCORE_THRESHOLD = 0.25
"""Detections that count in the confusion matrix (lower ones are not the model's claim)."""
IOU_THRESHOLD = 0.5
MIN_MATCHED = 5
"""Matched objects a class needs before the matrix judges where they went."""


def reference_log(run):
    """The CSV log ``run`` names: the file itself, an artifact prefix (its ``-log.csv``), or
    a folder holding one ``*-log.csv``; OptionsError, naming ``--reference``, if none."""
    candidates = [run, log_path(run)]
    if os.path.isdir(run):
        candidates = sorted(glob.glob(os.path.join(glob.escape(run), "*-log.csv")))
        if len(candidates) > 1:
            raise OptionsError("--reference %s: the folder holds %d logs (%s): name one"
                               % (run, len(candidates), ", ".join(
                                   os.path.basename(path) for path in candidates)))
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise OptionsError("--reference %s: no such CSV log; name a run's <prefix>-log.csv "
                       "(or its prefix, or its folder)" % run)


class ReferenceCheck(Hook):
    """Compares each epoch's total loss (the sum of ``loss_names``) and ``val_map`` with the
    same epoch of the reference log at ``path`` (see the module); figures the reference lacks
    are not compared. OptionsError if it has neither these losses nor a validation mAP."""
    only_rank0 = True

    def __init__(self, path, loss_names):
        # The log readers' module plots with matplotlib: loaded only when there is a log.
        from zoo.inference.visualize import log_column, read_log_rows
        self.path, self.loss_names = path, tuple(loss_names)
        try:
            rows = read_log_rows(path)
            self.epochs = log_column(rows, "epoch")
            self.losses = (sum(log_column(rows, name) for name in self.loss_names)
                           if all(name in rows[0] for name in self.loss_names) else None)
            self.maps = log_column(rows, "val_map") if "val_map" in rows[0] else None
        except DataError as err:
            raise OptionsError("--reference %s" % err) from None
        if self.losses is None and self.maps is None:
            raise OptionsError("--reference %s: neither this model's losses (%s) nor val_map "
                               "among its columns (%s)" % (
                                   path, ", ".join(self.loss_names),
                                   ", ".join(name for name in rows[0] if name)))
        self.warned = set()

    def after_epoch(self, trainer, epoch, row):
        index = np.flatnonzero(self.epochs == epoch + 1)
        if not len(index):
            return None
        index = index[-1]
        loss = sum(row[name] for name in self.loss_names)
        compared = []
        if self.losses is not None and np.isfinite(self.losses[index]):
            reference = self.losses[index]
            compared.append("loss %.4g against %.4g" % (loss, reference))
            if loss > reference * (1 + LOSS_BAND):
                self._warn(trainer, epoch, "loss", "loss %.4g against the reference's %.4g, "
                           "above it by more than the band of %d%%" % (
                               loss, reference, 100 * LOSS_BAND))
        val_map = row.get("val_map")
        if self.maps is not None and val_map is not None and np.isfinite(self.maps[index]):
            reference = self.maps[index]
            compared.append("mAP %.4f against %.4f" % (val_map, reference))
            if reference - val_map > max(MAP_FLOOR, MAP_BAND * reference):
                self._warn(trainer, epoch, "mAP", "validation mAP %.4f against the "
                           "reference's %.4f, below it by more than the band of max(%g, "
                           "%d%% of it)" % (val_map, reference, MAP_FLOOR, 100 * MAP_BAND))
        if compared:
            trainer.health.result("reference", "ok", "epoch %d: %s" % (epoch + 1,
                                                                       ", ".join(compared)))
        return None

    def _warn(self, trainer, epoch, figure, what):
        if figure in self.warned:
            return
        self.warned.add(figure)
        trainer.health.warn("reference", "epoch %d: %s (%s); compare the two runs' settings "
                            "and data, and their curves (zoo plot-log)" % (
                                epoch + 1, what, self.path), epoch=epoch + 1)


def confusion_path(prefix, extension="csv"):
    """Where a run at artifact ``prefix`` writes its latest confusion matrix."""
    return "%s-confusion.%s" % (prefix, extension)


def confusion_matrix(dataset, detections, score_threshold=SCORE_THRESHOLD,
                     iou_threshold=IOU_THRESHOLD):
    """``(K + 1, K + 1)`` counts of ``dataset``'s K classes: row = the object's true class
    (row K: no object, a detection matching none), column = the class it was detected as
    (column K: missed). Each detection scoring at least ``score_threshold``, best first,
    takes the unmatched object it overlaps most (IoU at least ``iou_threshold``), whatever
    either's class; detections of difficult objects are not counted."""
    count = len(dataset.class_names)
    matrix = np.zeros((count + 1, count + 1), np.int64)
    offset = pixel_offset(dataset.box_convention)
    for record, rows in zip(dataset.records, detections):
        rows = in_pixels(rows[rows[:, 1] >= score_threshold], record)
        rows = rows[np.argsort(-rows[:, 1], kind="stable")]
        boxes = np.asarray(record.boxes, np.float32).reshape(-1, 4)
        classes = np.asarray(record.class_ids, np.int64).reshape(-1)
        difficult = np.asarray(record.difficult, bool).reshape(-1)
        overlaps = (iou(rows[:, 2:6], boxes, offset) if len(rows) and len(boxes)
                    else np.zeros((len(rows), len(boxes))))
        taken = np.zeros(len(boxes), bool)
        for row, overlap in zip(rows, overlaps):
            overlap = np.where(taken, -1.0, overlap)
            best = int(np.argmax(overlap)) if len(boxes) else -1
            if best < 0 or overlap[best] < iou_threshold:
                matrix[count, int(row[0])] += 1
                continue
            taken[best] = True
            if not difficult[best]:
                matrix[classes[best], int(row[0])] += 1
        for class_id in classes[~taken & ~difficult]:
            matrix[class_id, count] += 1
    return matrix


def swapped_classes(matrix, min_matched=MIN_MATCHED):
    """``[(true class, detected class, count, matched)]``: each class whose matched objects
    (at least ``min_matched``) are mostly detected as another class that is itself mostly
    detected as something else. A model early in training that calls most things by one
    class is not swapping: that class is still mostly detected as itself."""
    count = len(matrix) - 1
    matched = matrix[:count, :count]
    totals = matched.sum(axis=1)
    majority = matched.argmax(axis=1)
    judged = (totals >= min_matched) & (matched[np.arange(count), majority] * 2 > totals)
    return [(c, int(majority[c]), int(matched[c, majority[c]]), int(totals[c]))
            for c in range(count)
            if judged[c] and majority[c] != c and judged[majority[c]]
            and majority[majority[c]] != majority[c]]


class ConfusionMatrix(Hook):
    """At each validation (the detections of the :class:`~zoo.engine.hooks.Validation` hook
    before it), writes :func:`confusion_matrix` to ``<prefix>-confusion.csv`` and ``.png``,
    and warns once when :func:`swapped_classes` finds classes swapped."""
    only_rank0 = True

    def __init__(self, prefix, dataset):
        self.prefix, self.dataset, self.warned = prefix, dataset, False

    def after_epoch(self, trainer, epoch, row):
        validation = [hook for hook in trainer.hooks if isinstance(hook, Validation)]
        if not validation or validation[0].detections is None:
            return None
        matrix = confusion_matrix(self.dataset, validation[0].detections)
        names = list(self.dataset.class_names)
        write_csv(confusion_path(self.prefix), matrix, names)
        picture = write_png(confusion_path(self.prefix, "png"), matrix, names, epoch + 1)
        trainer.health.picture(picture)
        swapped = swapped_classes(matrix)
        if not swapped:
            trainer.health.result("confusion", "ok", "epoch %d: no class swapped" % (epoch + 1))
        elif not self.warned:
            self.warned = True
            trainer.health.warn("confusion", "epoch %d: validation objects are mostly detected "
                                "as another class: %s; the training annotations may name the "
                                "classes otherwise than the validation's (see %s)" % (
                                    epoch + 1, ", ".join(
                                        "%s as %s (%d of %d)" % (names[c], names[d], n, total)
                                        for c, d, n, total in swapped),
                                    confusion_path(self.prefix)), epoch=epoch + 1)
        return None


def write_csv(path, matrix, names):
    def write(temporary):
        with open(temporary, "w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(["true \\ detected"] + names + ["missed"])
            for name, counts in zip(names + ["no object"], matrix):
                writer.writerow([name] + [int(n) for n in counts])
    atomic_write(path, write)


def write_png(path, matrix, names, epoch):
    """The matrix as a picture, each row coloured by its share; returns ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    shares = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    side = 1.2 + 0.5 * len(matrix)
    figure = Figure(figsize=(side + 1, side), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    axes.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    for (i, j), value in np.ndenumerate(matrix):
        axes.text(j, i, str(value), ha="center", va="center",
                  color="white" if shares[i, j] > 0.5 else "black", fontsize=8)
    axes.set_xticks(range(len(matrix)), names + ["missed"], rotation=45, ha="right")
    axes.set_yticks(range(len(matrix)), names + ["no object"])
    axes.set(xlabel="detected as", ylabel="true class",
             title="validation confusion, epoch %d" % epoch)
    figure.tight_layout()
    atomic_write(path, lambda temporary: figure.savefig(temporary, format="png"))
    return path
