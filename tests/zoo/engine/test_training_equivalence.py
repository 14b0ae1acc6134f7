"""Training without detections in the graph (issue 23) is the training of before: the same
losses and the same parameters after several updates, through the zoo's Trainer, on a fixed
batch. The reference is computed here, with the graph of before (detections output on).
Also the OpenMP wait policy the zoo sets for training's sake."""
import functools
import os

import numpy as np
import pytest

import zoo
from zoo.engine.hooks import Hook
from zoo.engine.trainer import OptimizerOptions, Trainer, TrainerOptions
from symbols.ssd import DETECTION_OUTPUT
from test_trainer import TINY, InMemoryDataset, loader

STEPS = 3
from factories import ROOT


class LossLog(Hook):
    def __init__(self):
        self.losses = []

    def after_step(self, trainer, epoch, batch_index, losses):
        self.losses.append(dict(losses))


def train_fixed_batch(post_processing, with_detections):
    """``(per-step losses, arg_params, initial arg_params, the graph's outputs)`` of
    ``STEPS`` updates on one batch of two images."""
    model = zoo.get_model("ssd_mobilenetv2_stride8", **TINY, post_processing=post_processing)
    if with_detections:
        # Today's graph before issue 23: the training graph also decodes detections.
        model.train_symbol = functools.partial(model.train_symbol, with_detections=True)
    fixed = loader(InMemoryDataset(2), augment=False)
    log = LossLog()
    trainer = Trainer(model, fixed, TrainerOptions(epochs=STEPS, batch_size=2),
                      OptimizerOptions(lr=0.01), [log])
    trainer.fit()
    initial = model.init_params(seed=0)[0]
    return log.losses, trainer.params()[0], initial, model.train_symbol().list_outputs()


@pytest.mark.parametrize("post_processing", ["multibox", "per_class"])
def test_training_without_detections_is_the_same_training(post_processing):
    losses, params, initial, outputs = train_fixed_batch(post_processing, False)
    ref_losses, ref_params, _, ref_outputs = train_fixed_batch(post_processing, True)
    assert DETECTION_OUTPUT + "_output" in ref_outputs
    assert DETECTION_OUTPUT + "_output" not in outputs
    assert len(losses) == STEPS
    for step, (ours, ref) in enumerate(zip(losses, ref_losses)):
        assert list(ours) == list(ref)
        np.testing.assert_allclose(list(ours.values()), list(ref.values()), rtol=1e-5,
                                   err_msg="step %d" % (step + 1))
    assert sorted(params) == sorted(ref_params)
    moved = 0
    for name, value in params.items():
        np.testing.assert_allclose(value.asnumpy(), ref_params[name].asnumpy(), rtol=1e-5,
                                   atol=1e-7, err_msg=name)
        moved += not np.allclose(value.asnumpy(), initial[name].asnumpy())
    # The updates did happen (a comparison of two untouched models proves nothing).
    assert moved > len(params) // 2


def test_only_ssd_training_graphs_output_detections(faster_rcnn):
    with pytest.raises(ValueError, match="only an SSD training graph can output detections"):
        faster_rcnn.train_symbol(with_detections=True)

