"""Repeated batches: the loader returning the same batch again (the same dataset items, or
the same tensor), and epochs that see far fewer distinct images than the split holds.

Per step: the batch's dataset indices (its sources, before augmentation) go into a set,
and a hash of a fixed number of the tensor's values (:data:`SAMPLED_VALUES`, whatever its
size) and of its label into a dictionary; both are emptied at each epoch. A correct loader
gives each item of the split once an epoch, and a batch that repeats another exactly
cannot come from augmented samples.
"""
import numpy as np

from zoo.engine.hooks import Hook

__all__ = ["BatchRepeatCheck", "CHECK", "tensor_key"]

CHECK = "repeated batches"
SAMPLED_VALUES = 1 << 16
"""Values of a batch's tensor hashed (evenly spaced): an exact repeat equals on all."""
DISTINCT_SHARE = 0.5
# A correct loader gives floor(n / b) * b of a split's n items an epoch, always more than
# half of them: fewer is a loader that stops early or draws from a part of the split.
SHOWN_ITEMS = 4
"""Dataset items a message names."""


def tensor_key(data, label):
    """A hash of ``SAMPLED_VALUES`` evenly spaced values of a batch's ``data`` and of its
    whole ``label``."""
    flat = np.asarray(data).reshape(-1)
    step = max(1, flat.size // SAMPLED_VALUES)
    return hash((flat[::step].tobytes(), np.asarray(label).tobytes()))


def items(dataset, indices):
    """``"3 (000003.jpg), 17 (000017.jpg)"``: dataset items with their file names where the
    dataset knows them."""
    names = []
    for index in list(indices)[:SHOWN_ITEMS]:
        try:
            names.append("%d (%s)" % (index, dataset.image_path(int(index))))
        except (AttributeError, IndexError, KeyError, TypeError):
            names.append("%d" % index)
    return ", ".join(names) + (", ..." if len(indices) > SHOWN_ITEMS else "")


class BatchRepeatCheck(Hook):
    """Warns, once an epoch, when a batch holds dataset items the epoch already gave or
    equals an earlier batch's tensor; at the epoch's end, when it saw fewer than
    :data:`DISTINCT_SHARE` of the split's items."""
    only_rank0 = True

    def __init__(self):
        self.seen, self.tensors = set(), {}
        self.warned = False         # this epoch
        self.repeats = 0            # batches that repeated, the whole run
        self.distinct = None        # distinct items of the last epoch

    def before_epoch(self, trainer, epoch):
        self.seen, self.tensors, self.warned = set(), {}, False

    def before_step(self, trainer, epoch, batch_index, batch):
        indices = np.asarray(batch.indices)[:len(batch.indices) - batch.pad]
        key = tensor_key(batch.data, batch.label)
        again = [index for index in indices.tolist() if index in self.seen]
        same = self.tensors.get(key)
        self.seen.update(indices.tolist())
        self.tensors.setdefault(key, batch_index)
        if not again and same is None:
            return
        self.repeats += 1
        if self.warned:
            return
        self.warned = True
        dataset = getattr(trainer.loader, "dataset", None)
        if same is not None and len(again) == len(indices):
            what = ("batch %d repeats batch %d exactly (the same items %s and the same tensor)"
                    % (batch_index + 1, same + 1, items(dataset, again)))
        elif same is not None:
            what = ("batch %d's tensor equals batch %d's, from other items (%s): the split "
                    "lists the same images under several entries, or the loader ignores the "
                    "index" % (batch_index + 1, same + 1, items(dataset, indices)))
        else:
            what = ("batch %d holds %d item%s the epoch already gave (%s)"
                    % (batch_index + 1, len(again), "" if len(again) == 1 else "s",
                       items(dataset, again)))
        trainer.health.warn(CHECK, "epoch %d: %s; a loader gives each item once an epoch: "
                            "check the loader (a custom one?) and the split's list"
                            % (epoch + 1, what), epoch=epoch + 1)

    def after_epoch(self, trainer, epoch, row):
        self.distinct = len(self.seen)
        dataset = getattr(trainer.loader, "dataset", None)
        shards = getattr(trainer.loader, "num_shards", 1)
        # What the epoch draws, not the dataset's length: a tiled dataset holds every window
        # of every photo but draws the windows with boxes and a share of the empty ones.
        draw = getattr(trainer.loader, "epoch_items", None)
        split = ((len(draw(epoch)) if draw is not None else len(dataset)) // shards
                 if dataset is not None else None)
        if split and self.distinct < DISTINCT_SHARE * split and not self.warned:
            trainer.health.warn(CHECK, (
                "epoch %d saw %d distinct images of the %d the split holds%s (%d steps of %d): "
                "the loader stops early or draws from a part of the split; check the loader "
                "and the split's list"
                % (epoch + 1, self.distinct, split, " for this worker" if shards > 1 else "",
                   len(trainer.loader), trainer.options.batch_size)), epoch=epoch + 1)
        else:
            # A warning of an earlier epoch stays (HealthReport keeps it).
            trainer.health.result(CHECK, "ok", "%d distinct images an epoch" % self.distinct)
