"""BatchNorm, training against inference: do the running statistics, which inference
normalises with, describe the activations that training normalised with its batches'?

At a validation epoch the same batch (the first one the run trained on) goes through the
training graph twice, with the run's current parameters on a copy: in eval mode (with the
running statistics, as in inference) and in train mode (each BatchNorm normalising with the
batch's statistics, as in training). The run's own arrays are never touched, so
training goes on exactly as without the check. The loss of eval mode against train mode says
whether the difference matters; per layer, the batches' mean and variance of each channel
against its running mean and variance say where it comes from (written to
``<prefix>-batchnorm.csv``).

Also: the note when ``--freeze`` fixes BatchNorm scales and shifts but not their statistics.
"""
import csv
import logging
import os
import time

import mxnet as mx
import numpy as np

from symbols.layers import batchnorm_layers
from zoo.engine.hooks import Hook
from zoo.engine.trainer import frozen_batchnorm, frozen_params, mxnet_contexts

__all__ = ["BUDGET", "BatchNormCheck", "CHECK", "FACTOR_LIMIT", "LOSS_RATIO_LIMIT",
           "MIN_STEPS", "batchnorm_path"]

LOG = logging.getLogger("zoo.train")
CHECK = "batchnorm"
BATCHES = 1
"""How many of the run's first batches the check scores: the two modes are compared on the
same images, so one batch is enough to see statistics that are far off."""
BUDGET = 0.01
"""The share of the run's time the check may take. Its passes cost about three forward
passes (0.5-0.7 s on ssd_mobilenetv2_stride8 at 192 pixels, batch 8, about two training
steps): at each validation, 2-7% of short epochs. A validation's check runs only if its
time so far plus the coming check's (the last one's; before the first, the time of
:data:`FIRST_COST_STEPS` training steps) stays within this share of the run's time; the
check after the last epoch, whose statistics the artifact keeps, always runs."""
FIRST_COST_STEPS = 3
"""What the first check is expected to cost, in training steps (measured: about 2)."""
LOSS_RATIO_LIMIT = 1.25
"""A loss this many times larger in eval mode than in train mode on the same batches
matters ..."""
FACTOR_LIMIT = 5.0
"""... when a layer's running statistics are this far off its batches' (see
:class:`LayerScore`): both together make the warning."""
NEGLIGIBLE_LOSS = 1e-3
"""A loss this small in both modes (no positive anchor in the batches) is not compared."""
MIN_STEPS = 100
"""Updates a run makes before the check runs: running statistics follow the batches slowly
(at momentum 0.9, the values of n updates ago weigh 0.9^n: 12% after 20, 0.5% after 50,
0.003% after 100) from a start far from some layers' (the initialiser's variance 1 against
0.0004 in MobileNetV2's last depthwise convolutions, whose statistics are then still 14x
off after 50 updates; a source artifact's, fitted to other data or trained briefly). A
healthy ssd_mobilenetv2_stride8 from the initialiser at 192 pixels, batch 8: worst layer
40x off after 20 updates, 5.3x after 40, 1.5x after 60, 1.2x after 80 (eval/train loss
1.12x)."""


def batchnorm_path(prefix):
    """Where a run at artifact ``prefix`` writes the per-layer figures of the check."""
    return prefix + "-batchnorm.csv"


class BatchNormCheck(Hook):
    """The check (see the module), every ``interval`` epochs within its :data:`BUDGET` and
    after the last one, once the run has made :data:`MIN_STEPS` updates: one warning, the
    first time a loss is :data:`LOSS_RATIO_LIMIT` times larger in eval mode or more and the
    layer whose running statistics are furthest from its batches' is :data:`FACTOR_LIMIT`
    off or more, naming that layer."""
    only_rank0 = True

    def __init__(self, prefix, interval=1, batches=BATCHES):
        self.prefix, self.interval, self.count = prefix, interval, batches
        self.batches, self.steps, self.rows, self.warned = [], 0, [], False
        self.probes = None  # bound at its first use, kept for the run
        self.started, self.spent, self.cost = None, 0.0, None  # the run's clock, the check's

    def before_train(self, trainer):
        self.started = time.perf_counter()
        if not trainer.options.freeze:
            return
        note = freeze_note(trainer.model.train_symbol(), trainer.options)
        if note:
            LOG.info("note: %s", note)

    def before_step(self, trainer, epoch, batch_index, batch):
        if len(self.batches) < self.count:
            # Copies: the loader may reuse its arrays for later batches.
            self.batches.append(trainer.data_batch(batch))

    def after_step(self, trainer, epoch, batch_index, losses):
        self.steps += 1

    def after_epoch(self, trainer, epoch, row):
        last = epoch + 1 == trainer.options.epochs
        if (epoch + 1) % self.interval and not last:
            return None
        if not last and not self.affordable():
            return None  # its last result stands until the budget allows another
        clock = time.perf_counter()
        if self._check(trainer, epoch):
            self.cost = time.perf_counter() - clock
            self.spent += self.cost
        return None

    def affordable(self):
        """Whether a check now keeps the check's time within :data:`BUDGET` of the run's."""
        elapsed = time.perf_counter() - self.started
        cost = self.cost
        if cost is None:
            cost = FIRST_COST_STEPS * elapsed / max(self.steps, 1)
        return self.spent + cost <= BUDGET * elapsed

    def _check(self, trainer, epoch):
        """Score the batch now; returns whether it did (no BatchNorm layer, or too few
        updates yet: it records why not)."""
        symbol = trainer.module.symbol
        layers = batchnorm_layers(symbol)
        if not layers:
            trainer.health.result(CHECK, "off", "no BatchNorm layer")
            return False
        if self.steps < MIN_STEPS:
            # It could not warn yet: its forward passes would cost short runs for nothing.
            trainer.health.result(CHECK, "not run", "from update %d on, this run has made %d"
                                  % (MIN_STEPS, self.steps))
            return False
        arg_params, aux_params = trainer.params()
        if self.probes is None:
            # Bound once a run: binding (graph, executors, gradient buffers) costs more than
            # the passes themselves, and the graph and batch shapes do not change.
            self.probes = bind_probes(symbol, layers, trainer.input_names, self.batches[0],
                                      mxnet_contexts(trainer.options.ctx)[0],
                                      (arg_params, aux_params), trainer.options.dtype == "bf16")
        score = score_batches(trainer, symbol, layers, self.batches, arg_params, aux_params,
                              self.probes)
        self._write(epoch, score)
        worst = score.worst()
        detail = "%s on %s, worst layer %s %.2fx off" % (
            "eval/train %s %.2fx" % (score.loss, score.ratio) if score.loss
            else "no loss to compare", batch_words(len(self.batches)), worst.name, worst.factor)
        if score.ratio < LOSS_RATIO_LIMIT or worst.factor < FACTOR_LIMIT:
            trainer.health.result(CHECK, "ok", detail)
        elif not self.warned:
            self.warned = True
            trainer.health.warn(CHECK, warning(score, len(self.batches), self.prefix),
                                epoch=epoch + 1)
        return True

    def _write(self, epoch, score):
        losses = {"%s_eval_train" % name: "%.4g" % (
            score.eval_losses[name] / max(score.train_losses[name], NEGLIGIBLE_LOSS))
            for name in score.train_losses}
        self.rows += [{"epoch": epoch + 1, "layer": layer.name,
                       "factor": "%.4g" % layer.factor, "mean_shift": "%.4g" % layer.shift,
                       "variance_ratio": "%.4g" % layer.variance_ratio, **losses}
                      for layer in score.layers]
        path = batchnorm_path(self.prefix)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=list(self.rows[0]))
            writer.writeheader()
            writer.writerows(self.rows)


def batch_words(count):
    return "1 batch" if count == 1 else "%d batches" % count


def warning(score, batches, prefix):
    worst = score.worst()
    return ("the same %s %.2fx worse in eval mode (running "
            "statistics) than in train mode (batch statistics): %s %.4g against %.4g; "
            "worst layer %s, whose running statistics are %.2fx off its batches' (mean "
            "shift %.2f standard deviations, variance %.3gx); figures per layer in %s. "
            "Statistics that never or hardly update (a BatchNorm momentum of 1 or near it) "
            "or that come from another model (a converted or --init-from source) are the "
            "usual causes; --freeze-bn trains with fixed ones" % (
                "training batch scores" if batches == 1
                else "%d training batches score" % batches, score.ratio, score.loss,
                score.eval_losses[score.loss], score.train_losses[score.loss], worst.name,
                worst.factor, worst.shift, worst.variance_ratio, batchnorm_path(prefix)))


def freeze_note(symbol, options):
    """A note when ``options.freeze`` fixes BatchNorm scales or shifts whose running
    statistics still follow the batches (they are not frozen by ``freeze_bn``), else None."""
    fixed = set(frozen_params(symbol.list_arguments(), options.freeze))
    frozen = {layer.name for layer in frozen_batchnorm(symbol, options.freeze_bn)}
    moving = [layer for layer in batchnorm_layers(symbol)
              if (layer.gamma in fixed or layer.beta in fixed) and layer.name not in frozen
              and not layer.use_global_stats]
    if not moving:
        return None
    return ("--freeze fixes the scale and shift of %d BatchNorm layer%s (%s%s) but not their "
            "running statistics, which keep following the training batches: add --freeze-bn "
            "to fix every BatchNorm layer's, or --freeze-bn REGEX those of the layers it "
            "names" % (
                len(moving), "" if len(moving) == 1 else "s", moving[0].name,
                ", ..." if len(moving) > 1 else ""))


class LayerScore:
    """One BatchNorm layer's running statistics against its batches' (per channel, the
    batches' mean and variance averaged): ``shift`` the mean distance of the means in running
    standard deviations, ``variance_ratio`` the geometric mean of batch over running
    variance, ``factor`` the geometric mean over channels of how far the second moment of
    the normalised activations is from 1 (1: described exactly)."""

    def __init__(self, name, mean, variance, running_mean, running_var, eps):
        scale = running_var + eps
        moment = (variance + (mean - running_mean) ** 2 + eps) / scale
        self.name = name
        self.factor = float(np.exp(np.mean(np.abs(np.log(moment)))))
        self.shift = float(np.mean(np.abs(mean - running_mean) / np.sqrt(scale)))
        self.variance_ratio = float(np.exp(np.mean(np.log((variance + eps) / scale))))


class Score:
    """The check's figures: ``train_losses`` and ``eval_losses`` (each loss summed over the
    batches), ``ratio`` the largest eval over train ratio of a loss (losses under
    :data:`NEGLIGIBLE_LOSS` in both modes left out) and ``loss`` its name, and a
    :class:`LayerScore` per layer."""

    def __init__(self, train_losses, eval_losses, layers):
        self.train_losses, self.eval_losses, self.layers = train_losses, eval_losses, layers
        ratios = {name: eval_losses[name] / max(train_losses[name], NEGLIGIBLE_LOSS)
                  for name in train_losses
                  if max(train_losses[name], eval_losses[name]) > NEGLIGIBLE_LOSS}
        self.loss = max(ratios, key=ratios.get) if ratios else None
        self.ratio = ratios[self.loss] if ratios else 1.0

    def worst(self):
        return max(self.layers, key=lambda layer: layer.factor)


def probe_symbol(symbol, layers, bf16=False):
    """``symbol``'s outputs, then each layer's per-channel mean and mean square of its input
    (in fp32: ``bf16`` for a graph of bfloat16 layers, whose inputs are cast first)."""
    outputs = [symbol[i] for i in range(len(symbol.list_outputs()))]
    for layer in layers:
        data = layer.input_of(symbol)
        if bf16:  # sums of thousands of values: bfloat16 keeps 8 bits of them
            data = mx.sym.amp_cast(data, dtype="float32", name="health_%s_fp32" % layer.name)
        outputs += [channel_mean(data, layer.axis, "health_%s_mean" % layer.name),
                    channel_mean(mx.sym.square(data, name="health_%s_square" % layer.name),
                                 layer.axis, "health_%s_mean_square" % layer.name)]
    return mx.sym.Group(outputs)


def channel_mean(data, axis, name):
    """The mean of ``data`` per index of ``axis``."""
    if axis != 1:
        return mx.sym.mean(data, axis=axis, exclude=True, name=name)
    # N, C, ...: MXNet reduces the contiguous trailing axes, then the batch, in 2/3 of the
    # time of one reduction over (0, 2, 3).
    flat = mx.sym.reshape(data, shape=(0, 0, -1), name=name + "_flat")
    return mx.sym.mean(mx.sym.mean(flat, axis=2, name=name + "_spatial"), axis=0, name=name)


def bind_probes(symbol, layers, input_names, batch, ctx, params, bf16=False):
    """Two Modules for forward passes of ``batch``'s shapes on ``ctx``, sharing their
    parameters (set to ``params``, ``(arg_params, aux_params)``) and memory: ``symbol``'s
    outputs alone (the eval-mode pass), and with each layer's input moments
    (:func:`probe_symbol`, the train-mode pass): the moments' reductions cost more than the
    network's forward pass, and only train mode's are read."""
    moments = bind_probe(probe_symbol(symbol, layers, bf16), input_names, batch, ctx)
    moments.init_params(arg_params=params[0], aux_params=params[1], allow_extra=True)
    outputs = mx.sym.Group([symbol[i] for i in range(len(symbol.list_outputs()))])
    return bind_probe(outputs, input_names, batch, ctx, shared=moments), moments


def bind_probe(symbol, input_names, batch, ctx, shared=None):
    """A Module of ``symbol`` for forward passes of ``batch``'s shapes on ``ctx`` (sharing
    ``shared``'s parameters and memory).

    Bound for training with one gradient (of the last parameter, near the outputs), never
    computed: bound without any, MXNet 1.9.1 applies MKL-DNN's inference-only fusion, which
    fails on a training graph ("could not create a primitive descriptor for a reorder
    primitive")."""
    names = [name for name in symbol.list_arguments()
             if name not in input_names and name != "label"]
    probe = mx.mod.Module(symbol, data_names=input_names, label_names=["label"],
                          context=[ctx], fixed_param_names=names[:-1])
    probe.bind(data_shapes=list(zip(input_names, (array.shape for array in batch.data))),
               label_shapes=[("label", batch.label[0].shape)], for_training=True,
               shared_module=shared)
    return probe


def score_batches(trainer, symbol, layers, batches, arg_params, aux_params, probes):
    """:class:`Score` of ``batches`` (DataBatches) through ``symbol`` (the run's training
    graph) with copies of the parameters, on the ``probes`` :func:`bind_probes` bound. The
    target operators' sampling is seeded alike in both modes; NumPy's random state is
    restored after (MXNet's is reseeded by the next epoch)."""
    count = len(symbol.list_outputs())
    losses = {mode: dict.fromkeys(trainer.model.loss_names, 0.0) for mode in (True, False)}
    moments = []
    state = np.random.get_state()
    try:
        for index, batch in enumerate(batches):
            # Eval mode first: a train-mode pass updates the copy's running statistics.
            probes[0].set_params(arg_params, aux_params, allow_extra=True)
            for train_mode, probe in zip((False, True), probes):
                np.random.seed(index)
                mx.random.seed(index)
                probe.forward(batch, is_train=train_mode)
                outputs = probe.get_outputs()
                for name, value in trainer.model.training_losses(outputs[:count]).items():
                    losses[train_mode][name] += value
            moments.append([output.asnumpy() for output in outputs[count:]])
    finally:
        np.random.set_state(state)
    return Score(losses[True], losses[False], layer_scores(layers, moments, aux_params))


def layer_scores(layers, moments, aux_params):
    """A :class:`LayerScore` per layer from each batch's per-channel means and mean squares
    (in ``moments``, two arrays a layer, in ``layers``' order)."""
    scores = []
    for i, layer in enumerate(layers):
        means = np.stack([batch[2 * i] for batch in moments])
        squares = np.stack([batch[2 * i + 1] for batch in moments])
        variances = np.maximum(squares - means ** 2, 0.0)
        scores.append(LayerScore(layer.name, means.mean(0), variances.mean(0),
                                 aux_params[layer.moving_mean].asnumpy(),
                                 aux_params[layer.moving_var].asnumpy(), layer.eps))
    return scores
