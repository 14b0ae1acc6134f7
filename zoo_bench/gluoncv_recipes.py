"""GluonCV's own training loops, rebuilt from GluonCV's pieces for the training benchmark
(:mod:`zoo_bench.train`); GluonCV ships its scripts outside the package.

- SSD, as ``scripts/detection/ssd/train_ssd.py``: the network hybridized with static
  allocation and static shapes, ``SSDDefaultTrainTransform`` given the network's anchors
  (so the data workers compute the training targets), ``Tuple(Stack(), Stack(), Stack())``,
  ``SSDMultiBoxLoss``, ``gluon.Trainer`` SGD stepping by 1, two loss metrics.
- Faster R-CNN, as ``scripts/detection/faster_rcnn/train_faster_rcnn.py``: only
  ``collect_train_params()`` trained, ``FasterRCNNDefaultTrainTransform`` (RPN targets in the
  workers; ``multi_stage`` for FPN), ``FasterRCNNTrainBatchify``, the network's own R-CNN
  sampling and targets, sigmoid cross-entropy and Huber losses for the RPN, softmax
  cross-entropy and Huber for R-CNN, its four loss and four accuracy metrics.

Each step is timed by part on a :class:`zoo_bench.train.PartClock`. The recipe
runs in a child process of its own (:class:`RecipeProcess`), under MXNet's threaded engine
as GluonCV's scripts run: its DataLoader forks worker processes after the network ran, and
under the zoo's synchronous engine (NaiveEngine) such workers hang.
"""
import dataclasses
import json
import logging
import subprocess
import sys

import mxnet as mx
from mxnet import autograd, gluon

from zoo_bench import child_environment
from zoo_bench.data import Cycled, GluonCVImageFiles
from zoo_bench.options import TrainBenchmarkOptions
from zoo_bench.train_parts import PartClock, Round, SideResult

__all__ = ["FasterRCNNLosses", "RecipeProcess", "on_cpu"]

LOG = logging.getLogger("zoo.benchmark_train.gluoncv")
LOG_INTERVAL = 100
"""Both scripts' default ``--log-interval``: a log line every 100 batches."""


THREADED_ENGINE = "ThreadedEnginePerDevice"
"""MXNet's default engine, which GluonCV's scripts run on."""


class RecipeProcess:
    """GluonCV network ``name``'s recipe in a child process, on the images of the VOC folder
    ``root`` (its train split), with the benchmark's ``options`` and ``sgd`` settings:
    :meth:`run_round` runs one epoch there, :meth:`result` ends it."""

    def __init__(self, name, root, options, sgd):
        request = json.dumps({"name": name, "root": root, "sgd": sgd,
                              "options": dataclasses.asdict(options)})
        env = child_environment(MXNET_ENGINE_TYPE=THREADED_ENGINE)
        self.child = subprocess.Popen([sys.executable, "-m", __name__], env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._ask(request)

    def _ask(self, line):
        """Send one line, return the child's one-line JSON answer."""
        self.child.stdin.write(line + "\n")
        self.child.stdin.flush()
        answer = self.child.stdout.readline()
        if not answer:
            raise RuntimeError("the GluonCV recipe's process ended (exit status %s); its "
                               "error is above" % self.child.wait())
        return json.loads(answer)

    def run_round(self):
        self._ask("round")

    def result(self):
        answer = self._ask("result")
        rounds = tuple(Round(**r) for r in answer.pop("rounds"))
        return SideResult(rounds=rounds, **answer)

    def close(self):
        """End the child if :meth:`result` did not (our side failed): it waits for a request
        between rounds, and exits at the end of its input."""
        if self.child.poll() is None:
            self.child.stdin.close()  # its loop ends at the end of its input
            try:
                self.child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def make_recipe(name, images, options, sgd):
    kind = SSDRecipe if name.startswith("ssd_") else FasterRCNNRecipe
    return kind(name, images, options, sgd)


def _serve():
    """The child side of :class:`RecipeProcess`: the request, then ``round`` lines, then
    ``result``; one JSON line answers each."""
    from zoo.data.factory import open_dataset
    # Only the answers go to the parent: anything else printed goes to stderr.
    answers, sys.stdout = sys.stdout, sys.stderr

    def answer(value):
        print(json.dumps(value), file=answers, flush=True)
    request = json.loads(sys.stdin.readline())
    images = GluonCVImageFiles(open_dataset("voc", request["root"], "train").records)
    # The parent checked the pairing; here the options are only this side's.
    options = TrainBenchmarkOptions(**dict(request["options"], compare=None))
    recipe = make_recipe(request["name"], images, options, request["sgd"])
    answer("ready")
    for line in sys.stdin:
        if line.strip() == "round":
            recipe.run_round()
            answer("done")
        else:
            result = recipe.result()
            answer({"label": result.label, "trainable_params": result.trainable_params,
                    "rounds": [dataclasses.asdict(r) for r in result.rounds]})
            return


class Recipe:
    """What both loops share: rounds of one epoch each over ``steps`` batches."""

    def __init__(self, name, options):
        self.name, self.options = name, options
        self.clock = PartClock()
        self.rounds_run = 0

    def loader(self, images, transform, batchify):
        """GluonCV's DataLoader over ``samples_per_round`` images, its workers' CPU counted."""
        loader = gluon.data.DataLoader(
            Cycled(images, self.options.samples_per_round).transform(transform),
            self.options.batch_size, shuffle=True, batchify_fn=batchify, last_batch="rollover",
            num_workers=self.options.data_threads)
        # The pool's worker processes are only reachable through its private list.
        self.clock.pids = [worker.pid for worker in loader._worker_pool._pool]
        return loader

    def run_round(self):
        """One epoch; the first ``warmup_rounds`` are not kept."""
        clock, steps = self.clock, 0
        clock.start_round()
        for batch in clock.timed_iter("data", self.data_loader):
            self.step(clock.timed("data", on_cpu)(batch), steps)
            steps += 1
        clock.end_round(steps * self.options.batch_size, steps,
                        self.rounds_run >= self.options.warmup_rounds)
        self.rounds_run += 1

    def result(self):
        trainable = sum(p.data().size for p in self.net.collect_params().values()
                        if p.grad_req != "null")
        return SideResult("gluoncv: %s recipe" % self.name, trainable, tuple(self.clock.rounds))

    def update_metrics(self, updates):
        for metric, (labels, preds) in zip(self.metrics, updates):
            metric.update(labels, preds)

    def log(self, index):
        if (index + 1) % LOG_INTERVAL == 0:
            LOG.info("[Batch %d] %s", index + 1, ", ".join(
                "%s=%.3f" % metric.get() for metric in self.metrics))


def on_cpu(batch):
    """The batch on the training device, as the scripts' ``split_and_load`` puts it (the
    workers' arrays live in shared memory, ``cpu_shared(0)``): per field one array."""
    return [gluon.utils.split_and_load(field[0] if isinstance(field, (list, tuple)) else field,
                                       [mx.cpu()])[0] for field in batch]


def _initialized(name, **kwargs):
    import gluoncv
    net = gluoncv.model_zoo.get_model(name, pretrained=False, pretrained_base=False, **kwargs)
    net.initialize()
    return net


class SSDRecipe(Recipe):
    def __init__(self, name, images, options, sgd):
        from gluoncv.data.batchify import Stack, Tuple
        from gluoncv.data.transforms.presets.ssd import SSDDefaultTrainTransform
        from gluoncv.loss import SSDMultiBoxLoss
        super().__init__(name, options)
        side = options.data_shape or 512
        self.net = _initialized(name)
        with autograd.train_mode():
            _, _, anchors = self.net(mx.nd.zeros((1, 3, side, side)))
        self.data_loader = self.loader(
            images, SSDDefaultTrainTransform(side, side, anchors.as_in_context(mx.cpu())),
            Tuple(Stack(), Stack(), Stack()))
        self.net.hybridize(static_alloc=True, static_shape=True)
        self.trainer = gluon.Trainer(self.net.collect_params(), "sgd", {
            "learning_rate": sgd["lr"], "wd": sgd["wd"], "momentum": sgd["momentum"]})
        self.loss = SSDMultiBoxLoss()
        self.metrics = [mx.metric.Loss("CrossEntropy"), mx.metric.Loss("SmoothL1")]

    def step(self, batch, index):
        clock, scale = self.clock, self.options.batch_size
        data, cls_targets, box_targets = batch
        with autograd.record():
            cls_preds, box_preds, _ = clock.timed("forward", self.net)(data)
            total, cls_loss, box_loss = clock.timed("forward", self.loss)(
                [cls_preds], [box_preds], [cls_targets], [box_targets])
        clock.timed("backward", autograd.backward)(total)
        clock.timed("update", self.trainer.step)(1)
        clock.timed("metrics", self.update_metrics)(
            [(0, [loss * scale for loss in cls_loss]), (0, [loss * scale for loss in box_loss])])
        clock.timed("logging", self.log)(index)


class FasterRCNNLosses:
    """The script's ``ForwardBackwardTask`` for the network ``net`` (in training mode): sigmoid
    cross-entropy and Huber (rho 1/9) for the RPN, softmax cross-entropy and Huber for
    R-CNN, each divided by the anchors or ROIs sampled. Called with a batch of
    ``FasterRCNNTrainBatchify``, it returns the four losses and the metrics' inputs."""

    def __init__(self, net):
        self.net = net
        self.rpn_cls_loss = gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)
        self.rpn_box_loss = gluon.loss.HuberLoss(rho=1 / 9.)
        self.rcnn_cls_loss = gluon.loss.SoftmaxCrossEntropyLoss()
        self.rcnn_box_loss = gluon.loss.HuberLoss()

    def __call__(self, data, label, rpn_cls_targets, rpn_box_targets, rpn_box_masks):
        outputs = self.net(data, label[:, :, :4], label[:, :, 4:5])
        cls_pred, box_pred, rpn_score, rpn_box = (outputs[i] for i in (0, 1, 5, 6))
        cls_targets, box_targets, box_masks = outputs[8:11]
        rpn_score = rpn_score.squeeze(axis=-1)
        num_rpn_pos = (rpn_cls_targets >= 0).sum()
        num_rcnn_pos = (cls_targets >= 0).sum()
        losses = [
            self.rpn_cls_loss(rpn_score, rpn_cls_targets, rpn_cls_targets >= 0)
            * rpn_cls_targets.size / num_rpn_pos,
            self.rpn_box_loss(rpn_box, rpn_box_targets, rpn_box_masks) * rpn_box.size / num_rpn_pos,
            self.rcnn_cls_loss(cls_pred, cls_targets, cls_targets.expand_dims(-1) >= 0)
            * cls_targets.size / num_rcnn_pos,
            self.rcnn_box_loss(box_pred, box_targets, box_masks) * box_pred.size / num_rcnn_pos]
        extra = [([rpn_cls_targets, rpn_cls_targets >= 0], [rpn_score]),
                 ([rpn_box_targets, rpn_box_masks], [rpn_box]),
                 ([cls_targets], [cls_pred]), ([box_targets, box_masks], [box_pred])]
        return losses, extra


class FasterRCNNRecipe(Recipe):
    def __init__(self, name, images, options, sgd):
        from gluoncv.data.batchify import FasterRCNNTrainBatchify
        from gluoncv.data.transforms.presets.rcnn import FasterRCNNDefaultTrainTransform
        from gluoncv.utils.metrics.rcnn import (RCNNAccMetric, RCNNL1LossMetric, RPNAccMetric,
                                                RPNL1LossMetric)
        super().__init__(name, options)
        self.net = _initialized(name, per_device_batch_size=options.batch_size)
        self.net.collect_params().setattr("grad_req", "null")
        self.net.collect_train_params().setattr("grad_req", "write")
        short = options.data_shape or self.net.short
        transform = FasterRCNNDefaultTrainTransform(
            short, options.max_size or self.net.max_size, self.net, ashape=self.net.ashape,
            multi_stage="fpn" in name)
        self.data_loader = self.loader(images, transform, FasterRCNNTrainBatchify(self.net, 1))
        self.net.hybridize(static_alloc=True)
        self.trainer = gluon.Trainer(self.net.collect_train_params(), "sgd", {
            "learning_rate": sgd["lr"], "wd": sgd["wd"], "momentum": sgd["momentum"]})
        self.losses = FasterRCNNLosses(self.net)
        self.metrics = [mx.metric.Loss(n) for n in ("RPN_Conf", "RPN_SmoothL1",
                                                     "RCNN_CrossEntropy", "RCNN_SmoothL1")]
        self.metrics += [RPNAccMetric(), RPNL1LossMetric(), RCNNAccMetric(), RCNNL1LossMetric()]

    def step(self, batch, index):
        clock = self.clock
        with autograd.record():
            losses, extra = clock.timed("forward", self.losses)(*batch)
            total = losses[0].sum() + losses[1].sum() + losses[2].sum() + losses[3].sum()
        clock.timed("backward", autograd.backward)(total)
        clock.timed("update", self.trainer.step)(self.options.batch_size)
        clock.timed("metrics", self.update_metrics)(
            [(0, [loss.sum()]) for loss in losses] + extra)
        clock.timed("logging", self.log)(index)


if __name__ == "__main__":
    _serve()
