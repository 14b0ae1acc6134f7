"""The recipe lr comes with the recipe's warm-up: a Faster R-CNN run given neither ``--lr``
nor ``--warmup-epochs`` warms its lr up over the recipe's updates (at most half of its own),
and its first line says so; a given ``--lr`` or ``--warmup-epochs`` is kept as given."""
import logging
import re
from types import SimpleNamespace

import pytest

from zoo import artifact
from zoo.architectures import ARCHITECTURES
from zoo.cli import main
from zoo.jobs.train import WARMUP_SHARE, TrainOptions, warm_up

NETWORK = "faster_rcnn_mobilenetv2"
TRAIN_IMAGES = 8                       # the shapes fixture's (tests/conftest.py)


def train(shapes, output, caplog, *flags):
    """``zoo train`` of :data:`NETWORK` for an epoch at batch 2; its first line and the
    optimizer settings its checkpoint records."""
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert main(["train", "--network", NETWORK, "--dataset", "voc", "--data-root", shapes,
                     "--data-shape", "128", "--batch-size", "2", "--epochs", "1",
                     "--val-split", "", "--data-threads", "1", "--output-dir", str(output),
                     *flags]) == 0
    first = next(record.getMessage() for record in caplog.records
                 if record.getMessage().startswith("training " + NETWORK))
    return first, artifact.read_meta(str(output / NETWORK), 1)["training"]["optimizer"]


@pytest.mark.slow
def test_the_recipe_lr_is_warmed_up_over_the_recipes_updates_and_the_first_line_says_so(
        shapes, tmp_path, caplog):
    first, optimizer = train(shapes, tmp_path / "default", caplog)
    said = re.search(r"warmed up from lr/10 over the first (\d+) of its (\d+) updates \(the "
                     r"faster_rcnn recipe's (\d+), at most half the run; --warmup-epochs to "
                     r"choose\)", first)
    assert said, first
    updates, total, recipe = (int(group) for group in said.groups())
    steps = TRAIN_IMAGES // 2
    assert total == steps and recipe == ARCHITECTURES["faster_rcnn"].recipe_warmup
    assert updates == min(recipe, int(WARMUP_SHARE * total)) > 0
    # the schedule the run trained by, in epochs: the updates over the steps of an epoch
    assert optimizer["warmup_epochs"] == pytest.approx(updates / steps)
    assert "scaled linearly to batch 2" in first


@pytest.mark.slow
@pytest.mark.parametrize("flags, warmup", [(("--lr", "0.001"), 0.0),
                                           (("--warmup-epochs", "0.5"), 0.5)])
def test_a_given_lr_or_warmup_is_kept(shapes, tmp_path, caplog, flags, warmup):
    first, optimizer = train(shapes, tmp_path / "given", caplog, *flags)
    assert "warmed up" not in first
    assert optimizer["warmup_epochs"] == warmup


def model(arch):
    """What :func:`warm_up` reads of a model: its architecture and name."""
    return SimpleNamespace(arch=ARCHITECTURES[arch], name=arch)


@pytest.mark.parametrize("steps, epochs", [(20, 10), (20, 100), (3, 1), (1, 1)])
def test_the_default_warmup_is_the_recipes_updates_at_most_half_the_run(steps, epochs):
    """The issue's run (20 steps an epoch, 10 epochs) warms up over 100 updates; a long run
    over the recipe's; a run of one update not at all."""
    arch = ARCHITECTURES["faster_rcnn_fpn"]
    options, note = warm_up(TrainOptions(epochs=epochs), model("faster_rcnn_fpn"), steps)
    updates = min(arch.recipe_warmup, int(WARMUP_SHARE * steps * epochs))
    assert round(options.warmup_epochs * steps) == updates
    assert (note is None) == (updates == 0)
    if note:
        assert note.startswith("warmed up from lr/10 over the first %d of its %d updates"
                               % (updates, steps * epochs)), note


@pytest.mark.parametrize("arch, given, warmup", [
    ("ssd", {}, 0.0), ("faster_rcnn", {"lr": 0.002}, 0.0),
    ("faster_rcnn", {"warmup_epochs": 0.0}, 0.0), ("faster_rcnn", {"warmup_epochs": 2.5}, 2.5)])
def test_ssd_a_given_lr_and_a_given_warmup_take_no_default_one(arch, given, warmup):
    options, note = warm_up(TrainOptions(epochs=10, **given), model(arch), 20)
    assert (options.warmup_epochs, note) == (warmup, None)
