"""The training loop's options (:class:`zoo.engine.trainer.Trainer`'s), in a module that
loads no MXNet: each field declares the ``zoo train`` flag that sets it (:mod:`zoo.flags`),
and :class:`zoo.jobs.train_options.TrainOptions` is made of these fields and the job's own,
so that an option of the loop is declared here once and reaches the Trainer as it is."""
import json
import re
from dataclasses import dataclass, fields
from typing import Optional

from zoo.choices import OPTIMIZERS, TRAIN_DTYPES
from zoo.errors import OptionsError
from zoo.flags import (batch_size_flag, comma_list, flag, float_in, increasing,
                       nonnegative_float, nonnegative_int, positive_float, positive_int)
from zoo.flags import ctx as ctx_name  # "ctx" is the field's name
from zoo.process import gpu_ids

__all__ = ["KV_STORES", "OptimizerOptions", "TrainerOptions", "check_lr_steps",
           "check_pattern"]

KV_STORES = ("local", "device", "dist_sync", "dist_device_sync", "dist_async")


@dataclass(frozen=True)
class TrainerOptions:
    """How to train: ``ctx`` is ``"cpu"`` or ``"gpu0,1,..."``; ``batch_size`` the samples of
    one step of this process (the loader's), split over its devices; ``freeze`` a regular
    expression of parameter names to keep fixed (``""``: none); ``freeze_bn`` one of the names
    of BatchNorm layers that normalise with their running statistics in training too, with
    statistics, scale and shift all fixed (a frozen batch norm); ``memory_saving`` recomputes
    activations in backward (:mod:`zoo.engine.memory`); ``seed`` the initialisation and
    per-epoch seed; ``dtype`` the precision of the graph's layers, ``fp32`` or ``bf16``
    (:mod:`zoo.engine.precision`: parameters, optimizer and losses stay fp32; ``auto`` is
    resolved by the job first)."""
    epochs: int = flag(10, "epochs to train in all", type=positive_int)
    batch_size: int = batch_size_flag(16)  # every command's flag (zoo.flags)
    ctx: str = flag("cpu", "'cpu' or 'gpu0,1,...'", type=ctx_name)
    kv_store: str = flag("local", "dist_* runs under `zoo launch`, each worker on its rank's "
                                  "shard of the data", choices=KV_STORES)
    freeze: str = flag("", "regular expression of parameter names to keep fixed, e.g. "
                           "'^conv1_|^stage1_'", metavar="REGEX")
    memory_saving: bool = flag(
        False, "keep few activations and recompute the others in backward, segment by "
               "segment (zoo.engine.memory); same losses and gradients. ssd_resnet101, batch "
               "8 at 512: about half the peak memory for about 1.2x the step time (zoo "
               "benchmark-memory)")
    seed: int = flag(0, "seed of the initialisation, the data order and the augmentation",
                     type=nonnegative_int)
    freeze_bn: str = flag(
        "", "frozen batch norm (GluonCV's and Detectron2's FrozenBN) for the BatchNorm layers "
            "whose name matches REGEX (all without one): they normalise with their running "
            "statistics in training too, and statistics, scale and shift all stay fixed; for "
            "fine-tuning from an artifact whose statistics fit the data",
        nargs="?", const=".", metavar="REGEX")
    dtype: str = flag(
        "fp32", "precision of the layers: bf16 runs convolutions, batch norm, activations, "
                "pooling and fully connected layers in bfloat16 (parameters, optimizer, "
                "anchors, targets and losses stay fp32; checkpoints are fp32), on CPUs with "
                "avx512_bf16 or amx_bf16; auto picks bf16 there and fp32 elsewhere (default: "
                "%(default)s)", choices=TRAIN_DTYPES)

    def __post_init__(self):
        self.check_trainer()

    def check_trainer(self):
        """Refuse a ctx, dtype, count or freeze pattern the loop cannot run with."""
        try:
            gpu_ids(self.ctx)
        except ValueError as err:
            raise ValueError("ctx %s" % err) from None
        if self.dtype == "auto":
            raise ValueError("dtype auto: resolve it first (zoo.engine.precision.resolve_dtype)")
        # Imported here: whether bf16 runs is MXNet's to say, which these options load only
        # when checked (a parser reads the fields alone).
        from zoo.engine.precision import check_dtype
        check_dtype(self.dtype, self.ctx)
        if self.epochs < 1 or self.batch_size < 1:
            raise OptionsError("epochs and batch_size must be >= 1, got %d and %d"
                               % (self.epochs, self.batch_size))
        # The one check of the freeze patterns (zoo train's flags are not parsed as such).
        check_pattern("freeze", self.freeze)
        check_pattern("freeze_bn", self.freeze_bn)

    def trainer_record(self):
        """The trainer's options as JSON values (what a checkpoint stores): these fields
        alone, whatever options class holds them."""
        return _record(self, TrainerOptions)


def check_pattern(name, pattern):
    """Raise :class:`OptionsError` if ``pattern`` (option ``name``; None or ``""``: none) is
    not a regular expression."""
    try:
        re.compile(pattern or "")
    except re.error as err:
        raise OptionsError("%s %r is not a regular expression: %s"
                           % (name, pattern, err)) from None


def check_lr_steps(lr_steps):
    """Refuse a schedule whose epochs are negative or not strictly increasing."""
    for i, epoch in enumerate(lr_steps):
        if not (isinstance(epoch, (int, float)) and epoch >= 0) or (
                i and epoch <= lr_steps[i - 1]):
            raise OptionsError("lr_steps %s: expected epochs >= 0 in strictly increasing "
                               "order" % ",".join("%g" % e if isinstance(e, (int, float))
                                                  else repr(e) for e in lr_steps))


@dataclass(frozen=True)
class OptimizerOptions:
    """The optimizer and its schedule: ``lr`` is the base rate of a step (gradients are
    averaged over devices and synchronous workers); it drops by ``lr_factor`` at each epoch
    of ``lr_steps`` after ``warmup_epochs`` of linear warm-up from lr / 10."""
    optimizer: str = flag("sgd", "update rule", choices=OPTIMIZERS)
    lr: float = 0.01                     # zoo train's flag is TrainOptions.lr's (the recipe's)
    momentum: float = flag(0.9, "momentum of sgd and nag",
                           type=float_in(0.0, 1.0, high_open=True))
    wd: float = flag(5e-4, "weight decay", type=nonnegative_float)
    clip_gradient: Optional[float] = flag(None, "clip each gradient element to +-this "
                                                "(default: no clipping)", type=positive_float)
    lr_steps: tuple = flag((), "comma-separated epochs at which the lr drops (none by "
                               "default)", type=increasing(comma_list(nonnegative_float)))
    lr_factor: float = flag(0.1, "lr multiplier at each step", type=positive_float)
    warmup_epochs: float = 0.0           # zoo train's flag is TrainOptions.warmup_epochs's

    def __post_init__(self):
        self.check_optimizer()

    def check_optimizer(self):
        """Refuse an unknown update rule or a schedule whose epochs do not increase; the
        schedule is kept as a tuple (a list would make the record unhashable and compare
        unequal to a tuple)."""
        if self.optimizer not in OPTIMIZERS:
            raise ValueError("optimizer %r: one of %s"
                             % (self.optimizer, ", ".join(OPTIMIZERS)))
        object.__setattr__(self, "lr_steps", tuple(self.lr_steps))
        check_lr_steps(self.lr_steps)

    def record(self):
        """The optimizer's options as JSON values (what a checkpoint stores): these fields
        alone, whatever options class holds them."""
        return _record(self, OptimizerOptions)

    def changes_from(self, saved):
        """``["lr 0.01 -> 0.02", ...]``: how these options differ from a saved
        :meth:`record` (settings it lacks count as unchanged)."""
        return ["%s %s -> %s" % (name, saved[name], value)
                for name, value in self.record().items()
                if name in saved and saved[name] != value]


def _record(options, options_class):
    """``options``' fields of ``options_class`` as JSON values."""
    return json.loads(json.dumps({field.name: getattr(options, field.name)
                                  for field in fields(options_class)}))
