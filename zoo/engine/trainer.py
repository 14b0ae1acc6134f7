"""The training loop: an MXNet Module stepped over a loader's batches, with hooks
(:mod:`zoo.engine.hooks`) for everything around it (divergence checks, validation,
checkpoints, the CSV log, progress, batch-norm averaging), on one process or as one worker
of a parameter-server cluster (``dist_*`` kvstores).

A resumed run ends bit-identical to an uninterrupted one: parameters, optimizer state and
update counts come from the artifact, the data order and each sample's augmentation from
``(seed, epoch, index)`` (:class:`zoo.data.DetectionLoader`), and the target operators'
sampling from a per-epoch seed.
"""
import contextlib
import logging
import os
import re
import signal
import time
import warnings

import mxnet as mx
import numpy as np

from symbols.layers import batchnorm_layers, global_stats_batchnorm
from zoo import artifact
from zoo.distributed.cluster import ClusterError, is_distributed, is_synchronous
from zoo.errors import OptionsError
from zoo.engine.health.report import HealthReport
from zoo.engine.memory import memory_saving_symbol
# The options are declared without MXNet, for the parsers; they are the loop's all the same.
from zoo.engine.options import OptimizerOptions, TrainerOptions, check_pattern
from zoo.engine.precision import bf16_training_symbol
from zoo.engine import module_adapter
from zoo.process import gpu_ids
from zoo.signals import stop_signals

__all__ = ["LOG", "OptimizerOptions", "OutputFolderInUse", "Trainer", "TrainerOptions",
           "TrainingDiverged", "TrainingError", "TrainingInterrupted", "bind_training_module",
           "check_pattern", "frozen_batchnorm", "frozen_params", "lr_scheduler",
           "mxnet_contexts"]

LOG = logging.getLogger("zoo.train")
# Optimizers whose update has a momentum term.
WITH_MOMENTUM = ("sgd", "nag")


class TrainingError(RuntimeError):
    """Training cannot go on; the message is one line saying why and what to do."""


class TrainingDiverged(TrainingError):
    """The loss or the parameters became NaN/inf, or the loss exploded; the message names
    the last good checkpoint."""


class OutputFolderInUse(TrainingError):
    """A new run's output folder already holds checkpoints."""


class TrainingInterrupted(TrainingError):
    """SIGINT or SIGTERM stopped training at a batch boundary; ``exit_status`` is the
    shell's status of a command killed by that signal (130, 143)."""

    def __init__(self, signum, message):
        super().__init__(message)
        self.signum, self.exit_status = signum, 128 + signum


def mxnet_contexts(spec):
    """``"cpu"`` or ``"gpu0,1"`` to a list of MXNet contexts."""
    try:
        ids = gpu_ids(spec)
    except ValueError as err:
        raise ValueError("ctx %s" % err) from None
    return [mx.gpu(i) for i in ids] or [mx.cpu()]


def bind_training_module(symbol, input_names, shapes, ctx="cpu", fixed=()):
    """A training graph ``symbol`` bound for training on the devices ``ctx`` (a device
    string): inputs ``input_names`` and ``label`` of ``shapes``, parameters ``fixed`` frozen.
    The Trainer's binding, and the memory benchmark's."""
    module = mx.mod.Module(symbol, data_names=list(input_names), label_names=["label"],
                           context=mxnet_contexts(ctx), fixed_param_names=list(fixed))
    module.bind(data_shapes=[(n, shapes[n]) for n in input_names],
                label_shapes=[("label", shapes["label"])], for_training=True)
    return module


def frozen_params(arg_names, pattern):
    """Parameters whose name matches the regular expression ``pattern`` (None: none)."""
    if not pattern:
        return []
    regex = re.compile(pattern)
    return [name for name in arg_names if regex.search(name)]


def frozen_batchnorm(symbol, pattern):
    """The :class:`~symbols.layers.BatchNormLayer` of ``symbol`` whose name matches the
    regular expression ``pattern`` (None: none)."""
    if not pattern:
        return []
    regex = re.compile(pattern)
    return [layer for layer in batchnorm_layers(symbol) if regex.search(layer.name)]


def model_parameters(symbol, input_names):
    """The names of ``symbol``'s parameters (its arguments but inputs and labels)."""
    return [name for name in symbol.list_arguments()
            if name not in input_names and name != "label"]


def lr_scheduler(base_lr, steps_per_epoch, lr_steps, lr_factor, warmup_epochs):
    """Step decay at the given epochs after a linear warm-up, counted in updates."""
    # a warm-up given in updates comes as a fraction of an epoch: not a float's rounding short
    warmup = int(warmup_epochs * steps_per_epoch + 1e-9)
    steps = [max(int(e * steps_per_epoch), warmup + 1) for e in lr_steps]
    check_distinct_updates(lr_steps, steps, steps_per_epoch, warmup)
    common = dict(base_lr=base_lr, warmup_steps=warmup,
                  warmup_begin_lr=base_lr * 0.1 if warmup else base_lr)
    if steps:
        return mx.lr_scheduler.MultiFactorScheduler(steps, factor=lr_factor, **common)
    # No drops: a factor-1 schedule keeps the warm-up and a constant rate after it.
    return mx.lr_scheduler.FactorScheduler(step=10 ** 9, factor=1.0, **common)


def check_distinct_updates(lr_steps, steps, steps_per_epoch, warmup):
    """Refuse two lr drops on one update (MXNet's scheduler would end in a traceback):
    epochs closer than an update, or both within the warm-up, which ends on ``warmup``."""
    for i in range(1, len(steps)):
        if steps[i] <= steps[i - 1]:
            raise OptionsError(
                "lr_steps %s: epochs %g and %g both drop the lr at update %d (%d updates per "
                "epoch%s); give epochs that fall on distinct updates" % (
                    ",".join("%g" % e for e in lr_steps), lr_steps[i - 1], lr_steps[i],
                    steps[i], steps_per_epoch,
                    ", warm-up to update %d" % warmup if warmup else ""))


@contextlib.contextmanager
def _environment(name, value):
    """Set environment variable ``name`` to ``value`` for the duration of the block."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


class Trainer:
    """Trains ``model`` on the batches of ``loader`` (a :class:`zoo.data.DetectionLoader`)
    with ``options`` (:class:`TrainerOptions`) and ``optimizer`` (:class:`OptimizerOptions`;
    default: ``options``, when they are both, as a job's
    :class:`~zoo.jobs.train_options.TrainOptions` with its lr and dtype resolved is).

    ``hooks`` (see :class:`zoo.engine.hooks.Hook`, and :func:`zoo.engine.hooks.default_hooks`)
    are called in order: ``before_train(trainer)`` before the module is built,
    ``before_epoch(trainer, epoch)``, ``before_step(trainer, epoch, batch_index, batch)``
    with the loader's batch before it enters the network,
    ``after_step(trainer, epoch, batch_index, losses)`` after each update,
    ``after_epoch(trainer, epoch, row)``, ``after_train(trainer)``;
    ``epoch`` counts from 0. A hook whose ``only_rank0`` is true runs on rank 0 only.

    ``kvstore`` is a created ``dist_*`` kvstore when this process is one worker of a cluster
    (its rank picked ``loader``'s shard); None lets Module create ``options.kv_store``.
    ``initial_params``: ``(arg_params, aux_params)`` a run that resumes nothing starts from
    instead of the model's initialiser (a fine-tuning run's, :func:`zoo.engine.finetune.init_from`).
    ``health``: the :class:`~zoo.engine.health.report.HealthReport` the health checks among
    the hooks report into (default: a new one), as ``trainer.health``.
    """

    def __init__(self, model, loader, options, optimizer=None, hooks=(), kvstore=None,
                 initial_params=None, health=None):
        optimizer = options if optimizer is None else optimizer
        # A job's TrainOptions is not checked when made (its dtype may be auto, its lr None):
        # the loop checks what it takes.
        options.check_trainer()
        optimizer.check_optimizer()
        if loader.batch_size != options.batch_size:
            raise ValueError("the loader's batch size %d is not batch_size %d"
                             % (loader.batch_size, options.batch_size))
        self.model, self.loader, self.options = model, loader, options
        self.optimizer_options = optimizer
        self.initial_params = initial_params
        self.health = HealthReport() if health is None else health
        self.kvstore = options.kv_store if kvstore is None else kvstore
        kind = getattr(self.kvstore, "type", self.kvstore)
        self.distributed, self.synchronous = is_distributed(kind), is_synchronous(kind)
        if self.distributed and isinstance(self.kvstore, str):
            raise ValueError("kvstore %r: create it first "
                             "(zoo.distributed.cluster.create_dist_kvstore) and pass it, its "
                             "rank picks the loader's shard" % kind)
        self.rank = getattr(self.kvstore, "rank", 0)
        self.num_workers = getattr(self.kvstore, "num_workers", 1)
        self.hooks = [hook for hook in hooks if self.rank == 0 or not hook.only_rank0]
        self.input_names = list(model.input_shapes())
        # Set by fit: the artifact resumed from (or None), the first epoch, the Module.
        self.resumed, self.start_epoch, self.module = None, 0, None
        # What stops the run at the next batch boundary: a signal's number, or an error a
        # hook deferred (see stop()).
        self.stop_signal, self.stop_error = None, None

    # -- the loop ---------------------------------------------------------------------------

    def fit(self, resume_prefix=None):
        """Run the epochs, from the newest checkpoint at ``resume_prefix`` if given;
        returns the per-epoch rows (``epoch`` counted from 1, ``lr``, ``samples_per_sec``,
        the model's losses, and what the hooks added, e.g. ``val_map``).

        SIGINT or SIGTERM (in the main thread) stops the run at the next batch boundary,
        or once the current epoch's hooks have run, with :class:`TrainingInterrupted`; a
        second SIGINT raises KeyboardInterrupt at once. The previous handlers come back
        after the run."""
        if resume_prefix is not None:
            self.resumed = self._load_checkpoint(resume_prefix)
            self.start_epoch = self.resumed.epoch
            self._check_resumed()
        self._check_freeze()
        # The schedule is checked before any hook touches the output folder.
        self.build_optimizer(len(self.loader))
        self._call("before_train")
        self.module = self.build_module()
        self._start(self.module)
        rows = []
        with stop_signals(self._on_signal):
            for epoch in range(self.start_epoch, self.options.epochs):
                self._call("before_epoch", epoch)
                row = self.run_epoch(epoch)
                for hook in self.hooks:
                    row = {**row, **(hook.after_epoch(self, epoch, row) or {})}
                rows.append(row)
                self._check_stop("after epoch %d" % (epoch + 1))
        self._call("after_train")
        return rows

    def stop(self, error):
        """Stop once the current step's or epoch's hooks have all run (so a checkpoint
        hook still saves the epoch), raising ``error``: for a hook whose failure must not
        lose the epoch, e.g. a validation image that cannot be read."""
        if self.stop_error is None:
            self.stop_error = error

    def _on_signal(self, signum):
        if self.stop_signal is not None:
            # A second one: the user does not want to wait for the batch to end.
            raise KeyboardInterrupt
        self.stop_signal = signum
        LOG.warning("%s: stopping at the end of this batch", signal.Signals(signum).name)

    def _check_stop(self, where):
        if self.stop_error is not None:
            raise self.stop_error
        if self.stop_signal is not None:
            raise TrainingInterrupted(self.stop_signal, "stopped by %s %s" % (
                signal.Signals(self.stop_signal).name, where))

    def _call(self, method, *args):
        for hook in self.hooks:
            getattr(hook, method)(self, *args)

    def run_epoch(self, epoch):
        """One epoch of updates; returns its row (mean losses, speed, learning rate)."""
        self.seed_epoch(epoch)
        totals = dict.fromkeys(self.model.loss_names, 0.0)
        samples, batches, start = 0, 0, time.time()
        for batch in self.loader.epoch(epoch):
            self._call("before_step", epoch, batches, batch)
            self.module.forward_backward(self.data_batch(batch))
            self.module.update()
            losses = self.model.training_losses(self.module.get_outputs())
            self._call("after_step", epoch, batches, losses)
            self._check_stop("at epoch %d, batch %d" % (epoch + 1, batches + 1))
            for name, value in losses.items():
                totals[name] += value
            batches += 1
            # Every worker's shard holds as many samples: this rate is the cluster's.
            samples += (len(batch.indices) - batch.pad) * self.num_workers
        row = {"epoch": epoch + 1, "lr": module_adapter.current_lr(self.module),
               "samples_per_sec": samples / max(time.time() - start, 1e-9)}
        row.update({name: total / max(batches, 1) for name, total in totals.items()})
        LOG.info("epoch %d: %s", epoch + 1, ", ".join(
            "%s %.4g" % (k, v) for k, v in row.items() if k != "epoch"))
        return row

    def seed_epoch(self, epoch):
        """Seed the global generators for ``epoch``: per-epoch seeds make the target
        operators' sampling identical after a resume. A hook that runs an extra forward pass
        at an epoch's first step calls it again after, so that the step samples as it would
        have without it."""
        np.random.seed((self.options.seed * 1000003 + epoch) % 2 ** 32)
        mx.random.seed((self.options.seed * 1000003 + epoch) % 2 ** 31)

    def data_batch(self, batch):
        """The module's batch of a loader's; a batch of another canvas shape than the last
        makes ``Module.forward`` reshape the executors (parameters and gradients kept)."""
        inputs = self.model.input_arrays(batch.data, batch.im_info)
        return mx.io.DataBatch(data=[mx.nd.array(inputs[n]) for n in self.input_names],
                               label=[mx.nd.array(batch.label)])

    def params(self):
        """``(arg_params, aux_params)`` of the module once every queued operator has run."""
        mx.nd.waitall()
        return self.module.get_params()

    def training_record(self):
        """The JSON-able options a checkpoint stores (and a resume compares against)."""
        return {"trainer": self.options.trainer_record(),
                "optimizer": self.optimizer_options.record()}

    # -- building and starting --------------------------------------------------------------

    def build_module(self):
        """The training graph bound on this run's devices, frozen parameters fixed, frozen
        batch norms normalising with their running statistics, in the options' precision."""
        shapes = self.model.train_input_shapes(self.options.batch_size, self.loader.max_objects)
        symbol, fixed = self.training_symbol()
        if self.options.dtype == "bf16":
            symbol = bf16_training_symbol(symbol, shapes)
        if self.options.memory_saving:
            symbol = memory_saving_symbol(symbol, shapes, fixed)
        return bind_training_module(symbol, self.input_names, shapes, self.options.ctx, fixed)

    def training_symbol(self):
        """``(symbol, fixed parameter names)``: the model's training graph with the
        ``freeze_bn`` layers frozen, and the parameters ``freeze`` and ``freeze_bn`` fix."""
        symbol = self.model.train_symbol()
        fixed = frozen_params(symbol.list_arguments(), self.options.freeze)
        layers = frozen_batchnorm(symbol, self.options.freeze_bn)
        if layers:
            symbol = global_stats_batchnorm(symbol, [layer.name for layer in layers])
            fixed += [name for layer in layers for name in (layer.gamma, layer.beta)
                      if name not in fixed]
        return symbol, fixed

    def gradient_scale(self):
        """``rescale_grad``: one over the number of gradients summed into an update.

        The losses normalise themselves per batch (by valid anchors / sampled ROIs), so each
        device's gradient is already a per-sample mean, whatever the batch size Module
        assumes. The local kvstore sums the devices' gradients, a synchronous one also the
        workers': dividing by their count makes N workers with batch B take the step of one
        worker with batch N x B at the same learning rate (exactly so when every shard has
        the same loss normaliser). dist_async applies each worker's sum on its own.
        """
        workers = self.num_workers if self.synchronous else 1
        return 1.0 / (len(mxnet_contexts(self.options.ctx)) * workers)

    def build_optimizer(self, steps_per_epoch):
        """This run's MXNet optimizer, its schedule counted in updates."""
        o = self.optimizer_options
        # With dist_async the servers' optimizer counts one update per worker's push.
        updates_per_epoch = steps_per_epoch * (self.num_workers if self.distributed
                                               and not self.synchronous else 1)
        params = {"learning_rate": o.lr, "wd": o.wd, "rescale_grad": self.gradient_scale(),
                  "lr_scheduler": lr_scheduler(o.lr, updates_per_epoch, o.lr_steps,
                                               o.lr_factor, o.warmup_epochs)}
        if o.optimizer in WITH_MOMENTUM:
            params["momentum"] = o.momentum
        if o.clip_gradient:
            params["clip_gradient"] = o.clip_gradient
        return mx.optimizer.create(o.optimizer, **params)

    def _init_optimizer(self, module):
        """Install this run's optimizer (its ``rescale_grad`` from :meth:`gradient_scale`,
        not the batch size Module expects).

        Where the update runs: with a synchronous dist kvstore the servers only sum the
        gradients and every worker runs the optimizer (MXNET_UPDATE_ON_KVSTORE=0, which
        MXNet 1.9.1's Module reads here). All workers then apply the same summed gradient to
        the same parameters, so their optimizer states are identical and local, and rank 0's
        checkpoint holds them: a resume is exact. Updating on the servers would keep the
        states there, where no worker can save them. dist_async needs the servers' updates
        (each worker's gradient is applied as it arrives).
        """
        update_on_servers = contextlib.nullcontext()
        if self.distributed:
            update_on_servers = _environment("MXNET_UPDATE_ON_KVSTORE",
                                             "0" if self.synchronous else "1")
        with warnings.catch_warnings(), update_on_servers:
            warnings.filterwarnings("ignore", message="Optimizer created manually")
            module.init_optimizer(kvstore=self.kvstore,
                                  optimizer=self.build_optimizer(len(self.loader)))

    def _start(self, module):
        """Initialise parameters and the optimizer, from the resumed checkpoint if any.
        Every worker of a cluster must resume from the same checkpoint."""
        if self.resumed is None and self.initial_params is not None:
            arg_params, aux_params = self.initial_params
        elif self.resumed is None:
            arg_params, aux_params = self.model.init_params(seed=self.options.seed)
        else:
            arg_params, aux_params = self.resumed.arg_params, self.resumed.aux_params
        module.init_params(arg_params=arg_params, aux_params=aux_params,
                           allow_missing=False, allow_extra=self.resumed is not None)
        self._init_optimizer(module)
        if self.resumed is not None:
            self._restore_optimizer(module)
        if self.distributed:
            self._join_rank0(module)

    @staticmethod
    def _load_checkpoint(prefix):
        epoch = artifact.latest_epoch(prefix)
        if epoch is None:
            raise artifact.ArtifactError("no complete checkpoint %s-NNNN.params/.json to "
                                         "resume from" % prefix)
        return artifact.load(prefix, epoch)

    def _check_freeze(self):
        """A freeze pattern that matches nothing is a typo, not a wish to train it all."""
        symbol = self.model.train_symbol()
        if self.options.freeze and not frozen_params(symbol.list_arguments(),
                                                     self.options.freeze):
            raise TrainingError("freeze %r matches no parameter of %s (whose names are like %s)"
                                % (self.options.freeze, self.model.name,
                                   ", ".join(model_parameters(symbol, self.input_names)[:3])))
        if self.options.freeze_bn and not frozen_batchnorm(symbol, self.options.freeze_bn):
            layers = [layer.name for layer in batchnorm_layers(symbol)]
            raise TrainingError("freeze_bn %r matches no BatchNorm layer of %s (%s)" % (
                self.options.freeze_bn, self.model.name,
                "whose names are like %s" % ", ".join(layers[:3]) if layers
                else "it has none"))

    def _check_resumed(self):
        """Refuse, in one line, an int8 or bf16 checkpoint, one that has no epoch left to
        train, or one that holds another model's parameters or classes (Module would fail
        deep inside MXNet)."""
        resumed = self.resumed
        name = resumed.name
        refusal = artifact.fp32_only(name, resumed.precision, "resume")
        if refusal:  # a bf16 one's weights would fit, rounded, with no optimizer state
            raise TrainingError(refusal)
        if resumed.epoch >= self.options.epochs:
            raise TrainingError("%s has trained %d epochs already and epochs is %d (it counts "
                                "every epoch from the first): ask for more to go on"
                                % (name, resumed.epoch, self.options.epochs))
        classes = artifact.class_names(self.model.config)
        if list(resumed.class_names) != classes:
            raise TrainingError("%s was trained on classes %s, this run's data has %s"
                                % (name, resumed.class_names, classes))
        symbol = self.model.train_symbol()
        shapes = self.model.train_input_shapes(self.options.batch_size, self.loader.max_objects)
        arg_shapes, _, aux_shapes = symbol.infer_shape(**shapes)
        expected = dict(zip(symbol.list_arguments(), arg_shapes))
        expected.update(zip(symbol.list_auxiliary_states(), aux_shapes))
        saved = {**resumed.arg_params, **resumed.aux_params}
        for param, shape in expected.items():
            if param in shapes:
                continue
            if param not in saved or saved[param].shape != tuple(shape):
                raise TrainingError("%s holds another model's parameters: %s is %s, %s needs %s"
                                    % (name, param, saved[param].shape if param in saved
                                       else "missing", self.model.name, tuple(shape)))

    def _restore_optimizer(self, module):
        """The resumed checkpoint's optimizer state and update counts (which place the
        schedule) under this run's optimizer settings; logs one line saying what changed."""
        resumed = self.resumed
        saved = (resumed.meta.get("training") or {}).get("optimizer")
        changes = self.optimizer_options.changes_from(saved) if saved else []
        state = artifact.load_optimizer_state(resumed.prefix, resumed.epoch)
        notes = ["changed optimizer settings apply: " + ", ".join(changes)] if changes else []
        if saved is None:
            notes.append("the checkpoint records no optimizer settings, this run's apply")
        if state is None:
            notes.append("no optimizer state saved, it starts afresh")
        elif saved and saved_optimizer(saved) != self.optimizer_options.optimizer:
            # Another optimizer class cannot take these arrays; the schedule still goes on.
            module_adapter.set_update_count(module, state.info["num_update"])
            notes.append("the %s state is dropped, %s starts afresh"
                         % (saved_optimizer(saved), self.optimizer_options.optimizer))
        elif not module_adapter.set_optimizer_state(module, state):
            notes.append("%s keeps the optimizer state on the servers, it starts afresh"
                         % module_adapter.kvstore(module).type)
        LOG.info("resumed from %s at epoch %d%s", resumed.prefix, resumed.epoch,
                 "".join("; " + note for note in notes))

    def _join_rank0(self, module):
        """Start every worker from rank 0's parameters (which Module's kvstore init stored on
        the servers) and check that all start at the same epoch. Collective: every worker
        calls it at the same point."""
        kvstore = module_adapter.kvstore(module)
        for i, (name, arrays) in enumerate(module_adapter.param_arrays(module)):
            kvstore.pull(name, out=arrays, priority=-i)
        module_adapter.mark_params_changed(module)
        key = "zoo:start_epoch"
        kvstore.init(key, mx.nd.array([self.start_epoch]))
        rank0_start = mx.nd.zeros((1,))
        kvstore.pull(key, out=rank0_start)
        if int(rank0_start.asscalar()) != self.start_epoch:
            raise ClusterError(
                "worker rank %d starts at epoch %d but rank 0 at epoch %d: every worker must "
                "resume from the same checkpoint (a shared output folder, or the same resume "
                "prefix on every host)" % (self.rank, self.start_epoch,
                                           int(rank0_start.asscalar())))


def saved_optimizer(saved):
    """The update rule of a checkpoint's optimizer record, ``name`` in those written before
    0.3.0 (``optimizer`` since)."""
    return saved.get("optimizer", saved.get("name"))
