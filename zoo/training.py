"""The training loop behind ``tools/train.py``: MXNet Module, schedule, logging,
validation, divergence checks and exactly resumable checkpoints, on one process or as one
worker of a parameter-server cluster (``dist_*`` kvstores)."""
import contextlib
import csv
import logging
import math
import os
import re
import time
import warnings

import mxnet as mx
import numpy as np

from . import checkpoint
from .distributed import ClusterError, is_distributed, is_synchronous
from .evaluation import evaluate_voc
from .memory import memory_saving_symbol

LOG = logging.getLogger("zoo.train")
DIVERGENCE_FACTOR = 1e3


class TrainingDiverged(RuntimeError):
    """The loss became NaN/inf or exploded; the message says which checkpoint is good."""


def contexts(spec):
    """``"cpu"`` or ``"gpu0,1"`` to a list of MXNet contexts."""
    if spec == "cpu":
        return [mx.cpu()]
    match = re.fullmatch(r"gpu([\d,]+)", spec)
    if not match:
        raise ValueError("--ctx must be 'cpu' or 'gpuN[,M...]', got %r" % spec)
    return [mx.gpu(int(i)) for i in match.group(1).split(",") if i]


def frozen_params(arg_names, pattern):
    """Parameters whose name matches the regular expression ``pattern`` (None: none)."""
    if not pattern:
        return []
    regex = re.compile(pattern)
    return [name for name in arg_names if regex.search(name)]


def lr_scheduler(base_lr, steps_per_epoch, lr_steps, lr_factor, warmup_epochs):
    """Step decay at the given epochs after a linear warm-up, counted in updates."""
    warmup = int(warmup_epochs * steps_per_epoch)
    steps = [max(int(e * steps_per_epoch), warmup + 1) for e in lr_steps]
    common = dict(base_lr=base_lr, warmup_steps=warmup,
                  warmup_begin_lr=base_lr * 0.1 if warmup else base_lr)
    if steps:
        return mx.lr_scheduler.MultiFactorScheduler(steps, factor=lr_factor, **common)
    # No drops: a factor-1 schedule keeps the warm-up and a constant rate after it.
    return mx.lr_scheduler.FactorScheduler(step=10 ** 9, factor=1.0, **common)


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
    """Trains ``model`` on batches from ``loader``; see ``tools/train.py`` for the options.

    ``kvstore`` is a created ``dist_*`` kvstore when this process is one worker of a cluster
    (its rank picked ``loader``'s shard); None lets Module create ``options.kv_store``. Only
    rank 0 validates and writes checkpoints and the CSV log.
    """

    def __init__(self, model, loader, options, val_dataset=None, meta=None, kvstore=None):
        self.model, self.loader, self.options = model, loader, options
        self.kvstore = options.kv_store if kvstore is None else kvstore
        kind = getattr(self.kvstore, "type", self.kvstore)
        self.distributed, self.synchronous = is_distributed(kind), is_synchronous(kind)
        if self.distributed and isinstance(self.kvstore, str):
            raise ValueError("kvstore %r: create it first (zoo.distributed.create_dist_kvstore) "
                             "and pass it, its rank picks the loader's shard" % kind)
        self.rank = getattr(self.kvstore, "rank", 0)
        self.num_workers = getattr(self.kvstore, "num_workers", 1)
        self.val_dataset = val_dataset
        self.meta = dict(meta or {})
        self.first_loss = None
        self.prefix = os.path.join(options.output_dir, model.name)
        self.input_names = list(model.input_shapes())
        self.losses_of = model.arch.training_losses
        self.loss_names = model.arch.LOSS_NAMES

    def build_module(self):
        shapes = self.model.train_input_shapes(self.options.batch_size, self.loader.max_objects)
        symbol = self.model.train_symbol()
        fixed = frozen_params(symbol.list_arguments(), self.options.freeze)
        if self.options.memory_saving:
            symbol = memory_saving_symbol(symbol, shapes, fixed)
        module = mx.mod.Module(
            symbol, data_names=self.input_names, label_names=["label"],
            context=contexts(self.options.ctx), fixed_param_names=fixed)
        module.bind(data_shapes=[(n, shapes[n]) for n in self.input_names],
                    label_shapes=[("label", shapes["label"])], for_training=True)
        return module

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
        return 1.0 / (len(contexts(self.options.ctx)) * workers)

    def optimizer(self, steps_per_epoch):
        o = self.options
        # With dist_async the servers' optimizer counts one update per worker's push.
        updates_per_epoch = steps_per_epoch * (self.num_workers if self.distributed
                                               and not self.synchronous else 1)
        params = {"learning_rate": o.lr, "wd": o.wd, "rescale_grad": self.gradient_scale(),
                  "lr_scheduler": lr_scheduler(o.lr, updates_per_epoch, o.lr_steps,
                                               o.lr_factor, o.warmup_epochs)}
        if o.optimizer in ("sgd", "nag"):
            params["momentum"] = o.momentum
        if o.clip_gradient:
            params["clip_gradient"] = o.clip_gradient
        return mx.optimizer.create(o.optimizer, **params)

    def init_optimizer(self, module, optimizer):
        """Install ``optimizer`` (its ``rescale_grad`` from :meth:`gradient_scale`, not the
        batch size Module expects).

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
            module.init_optimizer(kvstore=self.kvstore, optimizer=optimizer)

    def start_state(self, module, steps_per_epoch):
        """Initialise parameters and the optimizer, from ``--resume`` if given; returns the
        first epoch to run. Every worker of a cluster must resume from the same checkpoint."""
        o = self.options
        if o.resume:
            prefix = self.prefix if o.resume == "auto" else o.resume
            arg_params, aux_params, states, meta = checkpoint.load(prefix)
            module.init_params(arg_params=arg_params, aux_params=aux_params,
                               allow_missing=False, allow_extra=True)
            self.init_optimizer(module, self.optimizer(steps_per_epoch))
            if states is not None:
                self._set_optimizer_states(module, states)
            LOG.info("resumed from %s at epoch %d", prefix, meta["epoch"])
            begin = meta["epoch"]
        else:
            arg_params, aux_params = self.model.init_params(seed=o.seed)
            module.init_params(arg_params=arg_params, aux_params=aux_params,
                               allow_missing=False)
            self.init_optimizer(module, self.optimizer(steps_per_epoch))
            begin = 0
        if self.distributed:
            self._join_rank0(module, begin)
        return begin

    def _join_rank0(self, module, begin):
        """Start every worker from rank 0's parameters (which Module's kvstore init stored on
        the servers) and check that all start at the same epoch. Collective: every worker
        calls it at the same point."""
        kvstore, group = module._kvstore, module._exec_group
        for i, (name, arrays) in enumerate(zip(group.param_names, group.param_arrays)):
            kvstore.pull(name, out=arrays, priority=-i)
        module._params_dirty = True
        key = "zoo:start_epoch"
        kvstore.init(key, mx.nd.array([begin]))
        rank0_begin = mx.nd.zeros((1,))
        kvstore.pull(key, out=rank0_begin)
        if int(rank0_begin.asscalar()) != begin:
            raise ClusterError(
                "worker rank %d starts at epoch %d but rank 0 at epoch %d: every worker must "
                "resume from the same checkpoint (a shared --output-dir, or the same --resume "
                "PREFIX on every host)" % (self.rank, begin, int(rank0_begin.asscalar())))
        if self.synchronous and group.aux_names:
            kvstore.init(self._statistics_keys(group),
                         [arrays[0] for arrays in group.aux_arrays])

    @staticmethod
    def _statistics_keys(group):
        return ["zoo:aux:" + name for name in group.aux_names]

    def average_statistics(self, module):
        """Replace every worker's batch-norm running statistics by their mean over all
        workers and devices, so that all workers hold the same model and rank 0's checkpoint
        reflects every shard. Collective, synchronous kvstores only (a synchronous server
        answers with the sum of this round's pushes)."""
        kvstore, group = module._kvstore, module._exec_group
        count = self.num_workers * len(module._context)
        for i, (key, arrays) in enumerate(zip(self._statistics_keys(group),
                                              group.aux_arrays)):
            kvstore.pushpull(key, arrays, out=arrays, priority=-i)
            for array in arrays:
                array /= count
        module._params_dirty = True

    def _set_optimizer_states(self, module, states):
        if module._update_on_kvstore and self.distributed:
            LOG.warning("%s keeps the optimizer state on the servers: it starts afresh",
                        module._kvstore.type)
        elif module._update_on_kvstore:
            path = "%s.resume-%d" % (module._kvstore.type, os.getpid())
            with open(path, "wb") as stream:
                stream.write(states)
            module._kvstore.load_optimizer_states(path)
            os.remove(path)
        else:
            scale = module._updater.optimizer.rescale_grad
            module._updater.set_states(states)
            # The saved optimizer brings its schedule position; the gradient scale belongs to
            # this run's devices and workers.
            module._updater.optimizer.rescale_grad = scale

    @staticmethod
    def _optimizer_states(module):
        """Optimizer state with the optimizer itself (update count, schedule position)."""
        if module._update_on_kvstore:
            return None
        return module._updater.get_states(dump_optimizer=True)

    @staticmethod
    def _current_lr(module):
        optimizer = module._updater.optimizer if module._updater else module._optimizer
        return optimizer.learning_rate

    def fit(self):
        """Run the epochs; returns the list of per-epoch log rows."""
        o = self.options
        os.makedirs(o.output_dir, exist_ok=True)
        steps_per_epoch = len(self.loader)
        module = self.build_module()
        begin = self.start_state(module, steps_per_epoch)
        rows = []
        for epoch in range(begin, o.epochs):
            row = self.run_epoch(module, epoch)
            if self.synchronous:
                self.average_statistics(module)
            rows.append(row)
            if self.rank != 0:
                continue
            if self.val_dataset is not None and ((epoch + 1) % o.val_interval == 0
                                                 or epoch + 1 == o.epochs):
                row["val_map"] = self.validate(module)
                LOG.info("epoch %d: validation VOC07 mAP %.4f", epoch + 1, row["val_map"])
            self.save(module, epoch + 1)
            self.append_log(row)
        return rows

    def run_epoch(self, module, epoch):
        # Per-epoch seeds make the target operators' sampling identical after a resume.
        np.random.seed((self.options.seed * 1000003 + epoch) % 2 ** 32)
        mx.random.seed((self.options.seed * 1000003 + epoch) % 2 ** 31)
        totals = {name: 0.0 for name in self.loss_names}
        samples, batches, start = 0, 0, time.time()
        progress = _progress(self.loader, epoch, self.options, show=self.rank == 0)
        for batch in progress:
            module.forward_backward(self.data_batch(batch))
            losses = self.losses_of(module.get_outputs())
            self.check_finite(losses, epoch, batches)
            module.update()
            for name, value in losses.items():
                totals[name] += value
            batches += 1
            # Every worker's shard holds as many samples: this rate is the cluster's.
            samples += (len(batch.indices) - batch.pad) * self.num_workers
            speed = samples / max(time.time() - start, 1e-9)
            if hasattr(progress, "set_postfix"):
                progress.set_postfix({"samples/s": "%.1f" % speed,
                                      **{k: "%.3f" % (v / batches) for k, v in totals.items()}})
        elapsed = time.time() - start
        row = {"epoch": epoch + 1, "lr": self._current_lr(module),
               "samples_per_sec": samples / max(elapsed, 1e-9), "val_map": ""}
        row.update({name: total / max(batches, 1) for name, total in totals.items()})
        LOG.info("epoch %d: %s", epoch + 1, ", ".join(
            "%s %.4g" % (k, v) for k, v in row.items() if k not in ("epoch", "val_map")))
        return row

    def data_batch(self, batch):
        data, label = batch
        inputs = self.model.input_arrays(data)
        return mx.io.DataBatch(data=[mx.nd.array(inputs[n]) for n in self.input_names],
                               label=[mx.nd.array(label)])

    def check_finite(self, losses, epoch, batch):
        """Stop on a NaN/inf loss or one that grew a thousandfold over the first seen."""
        total = sum(losses.values())
        if self.first_loss is None:
            self.first_loss = total
        if math.isfinite(total) and total <= DIVERGENCE_FACTOR * max(self.first_loss, 1.0):
            return
        latest = checkpoint.latest_epoch(self.prefix)
        kept = ("the last good checkpoint is %s-%04d.params" % (self.prefix, latest)
                if latest is not None else "no checkpoint was written yet")
        raise TrainingDiverged("loss %s at epoch %d, batch %d (%s); %s. Lower --lr or add "
                               "--clip-gradient." % (
                                   "is not finite" if not math.isfinite(total)
                                   else "exploded to %.3g" % total, epoch + 1, batch + 1,
                                   ", ".join("%s %.4g" % kv for kv in losses.items()), kept))

    @staticmethod
    def current_params(module):
        """Parameters and BN statistics once every queued operator has run."""
        mx.nd.waitall()
        return module.get_params()

    def validate(self, module):
        arg_params, aux_params = self.current_params(module)
        result = evaluate_voc(self.model, arg_params, aux_params, self.val_dataset,
                              batch_size=self.options.batch_size,
                              num_workers=self.options.data_threads, progress=False)
        return result["voc07"]["mAP"]

    def save(self, module, epoch):
        arg_params, aux_params = self.current_params(module)
        meta = dict(self.meta, epoch=epoch)
        checkpoint.save(self.prefix, epoch, self.model.symbol(), arg_params, aux_params,
                        self._optimizer_states(module), meta)

    def append_log(self, row):
        path = self.prefix + "-log.csv"
        columns = ["epoch", "lr", "samples_per_sec"] + list(self.loss_names) + ["val_map"]
        new = not os.path.exists(path)
        with open(path, "a", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=columns, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)


def _progress(loader, epoch, options, show=True):
    iterable = loader.epoch(epoch)
    if not (options.progress and show):
        return iterable
    from tqdm import tqdm
    return tqdm(iterable, total=len(loader), desc="epoch %d/%d" % (epoch + 1, options.epochs),
                unit="batch", leave=False)
