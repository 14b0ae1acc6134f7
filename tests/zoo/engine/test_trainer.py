"""The training loop and its hooks (zoo.engine) on a tiny SSD and eight in-memory images."""
import csv
import dataclasses
import logging
import types

import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.data import (DetectionDataset, DetectionLoader, Record, ShortSideTrainTransform,
                      TrainTransform, ValTransform)
from zoo.engine import hooks as engine_hooks
from zoo.engine import module_adapter
from zoo.engine.hooks import Checkpointer, Hook, default_hooks
from zoo.engine.trainer import (OptimizerOptions, OutputFolderInUse, Trainer, TrainerOptions,
                                TrainingDiverged)
from zoo.jobs.train import TrainOptions, make_trainer

from factories import TINY_SSD

CLASSES = ("square", "bar")
TINY = dict(TINY_SSD, num_classes=len(CLASSES), class_names=list(CLASSES))
"""The tiny SSD (:data:`factories.TINY_SSD`) of :data:`CLASSES`, as ``zoo.get_model``
overrides."""
SIDE = TINY["data_shape"]


class InMemoryDataset(DetectionDataset):
    """Images held as arrays: a bright square or a wide bar on a dark, noisy 80x80 image."""

    def __init__(self, count, seed=0):
        rng = np.random.RandomState(seed)
        records, self.images = [], []
        for index in range(count):
            image = rng.randint(0, 60, (80, 80, 3)).astype(np.uint8)
            class_id = index % 2
            x, y = rng.randint(5, 35, 2)
            w, h = (30, 30) if class_id == 0 else (40, 14)
            image[y:y + h, x:x + w] = (220, 200 - 150 * class_id, 40 + 150 * class_id)
            self.images.append(image)
            records.append(Record(None, 80, 80, np.array([[x, y, x + w, y + h]], np.float32),
                                  np.array([class_id]), np.array([0]), key=index))
        super().__init__(records, CLASSES)

    def __getitem__(self, index):
        return self.images[index], self.records[index].label()


def tiny_model():
    return zoo.get_model("ssd_mobilenetv2_stride8", **TINY)


def loader(dataset=None, augment=True, batch_size=2):
    transform = (TrainTransform(SIDE, max_expand=1.0, min_ious=(None,)) if augment
                 else ValTransform(SIDE))
    return DetectionLoader(dataset or InMemoryDataset(8), batch_size, transform, seed=3,
                           shuffle=augment, num_workers=1, max_objects=1)


def train(output=None, epochs=2, optimizer=OptimizerOptions(lr=0.01), resume=None,
          hooks=None, data=None, **hook_options):
    """Rows of a run of the tiny model, with the default hooks writing to ``output``."""
    model = tiny_model()
    data = data or loader()
    if hooks is None:
        hooks = default_hooks(model, str(output), **{"progress": False, **hook_options})
    trainer = Trainer(model, data, TrainerOptions(epochs=epochs, batch_size=data.batch_size),
                      optimizer, hooks)
    return trainer.fit(resume_prefix=resume)


def total_loss(row):
    return sum(row[name] for name in tiny_model().loss_names)


def prefix_in(folder):
    return str(folder / tiny_model().name)


def test_loss_falls_on_a_fixed_batch():
    fixed = loader(InMemoryDataset(2), augment=False)
    rows = train(epochs=6, hooks=(), data=fixed, optimizer=OptimizerOptions(lr=0.005))
    assert [row["epoch"] for row in rows] == list(range(1, 7))
    losses = [total_loss(row) for row in rows]
    assert losses[-1] < 0.5 * losses[0], losses


class Recorder(Hook):
    def __init__(self, calls, name):
        self.calls, self.name = calls, name

    def before_train(self, trainer):
        self.calls.append((self.name, "before_train", trainer.start_epoch, trainer.module))

    def before_epoch(self, trainer, epoch):
        self.calls.append((self.name, "before_epoch", epoch))

    def after_step(self, trainer, epoch, batch_index, losses):
        assert set(losses) == set(trainer.model.loss_names)
        self.calls.append((self.name, "after_step", epoch, batch_index))

    def after_epoch(self, trainer, epoch, row):
        self.calls.append((self.name, "after_epoch", epoch, row.get("seen")))
        return {"seen": self.name}

    def after_train(self, trainer):
        self.calls.append((self.name, "after_train"))


def test_hooks_are_called_in_order_and_add_columns():
    calls = []
    rows = train(epochs=2, hooks=[Recorder(calls, "a"), Recorder(calls, "b")],
                 data=loader(InMemoryDataset(4)))
    expected = [("a", "before_train", 0, None), ("b", "before_train", 0, None)]
    for epoch in range(2):
        expected += [("a", "before_epoch", epoch), ("b", "before_epoch", epoch)]
        for step in range(2):
            expected += [("a", "after_step", epoch, step), ("b", "after_step", epoch, step)]
        # Each hook sees the columns the hooks before it added.
        expected += [("a", "after_epoch", epoch, None), ("b", "after_epoch", epoch, "a")]
    expected += [("a", "after_train"), ("b", "after_train")]
    assert calls == expected
    assert [row["seen"] for row in rows] == ["b", "b"]


class FakeKVStore:
    """What Trainer reads of a created dist kvstore."""

    def __init__(self, kind, rank, num_workers):
        self.type, self.rank, self.num_workers = kind, rank, num_workers


def test_progress_bar_shows_epoch_speed_and_losses(capsys):
    bar = engine_hooks.ProgressBar()
    train(epochs=1, hooks=[bar])
    assert "epoch 1/1" in capsys.readouterr().err
    assert bar.bar.n == 4
    assert "samples/s=" in bar.bar.postfix and "cls_loss=" in bar.bar.postfix


def test_progress_bar_says_what_the_first_step_does(capsys):
    """Binding an FPN ResNet-50 took 6.5 minutes with the bar at 0 and samples/s=0.0."""
    seen = []

    class Spy(engine_hooks.Hook):
        def after_step(self, trainer, epoch, batch_index, losses):
            if batch_index == 0 and epoch == 0:
                seen.append(capsys.readouterr().err)

    train(epochs=2, hooks=[Spy(), engine_hooks.ProgressBar()])
    err = capsys.readouterr().err
    assert engine_hooks.ProgressBar.FIRST_STEP in seen[0]
    assert "epoch 2/2" in err and engine_hooks.ProgressBar.FIRST_STEP not in err


def test_workers_other_than_rank0_skip_rank0_hooks_and_scale_gradients():
    model, data = tiny_model(), loader()
    options = TrainerOptions(epochs=1, batch_size=2)
    hooks = default_hooks(model, "unused", val_dataset=InMemoryDataset(2))
    worker = Trainer(model, data, options, OptimizerOptions(lr_steps=(1,)), hooks,
                     kvstore=FakeKVStore("dist_sync", 1, 2))
    assert [type(hook) for hook in worker.hooks] == [engine_hooks.StatisticsAveraging,
                                                     engine_hooks.DivergenceCheck]
    assert worker.gradient_scale() == 0.5
    assert worker.build_optimizer(4).lr_scheduler.step == [4]
    asynchronous = Trainer(model, data, options, OptimizerOptions(lr_steps=(1,)),
                           kvstore=FakeKVStore("dist_async", 0, 2))
    assert asynchronous.gradient_scale() == 1.0
    assert asynchronous.build_optimizer(4).lr_scheduler.step == [8]
    with pytest.raises(ValueError, match="create it first"):
        Trainer(model, data, TrainerOptions(epochs=1, batch_size=2, kv_store="dist_sync"),
                OptimizerOptions())


def test_options_are_checked_in_one_line():
    with pytest.raises(ValueError, match="ctx must be 'cpu' or 'gpuN"):
        TrainerOptions(epochs=1, batch_size=2, ctx="tpu")
    with pytest.raises(ValueError, match="freeze '\\(' is not a regular expression"):
        TrainerOptions(epochs=1, batch_size=2, freeze="(")
    with pytest.raises(ValueError, match="optimizer 'adagrad': one of sgd, nag, adam"):
        OptimizerOptions(optimizer="adagrad")
    with pytest.raises(ValueError, match="batch size 2 is not batch_size 4"):
        Trainer(tiny_model(), loader(), TrainerOptions(epochs=1, batch_size=4),
                OptimizerOptions())
    assert OptimizerOptions(lr_steps=[2, 3]) == OptimizerOptions(lr_steps=(2, 3))


def test_exploding_loss_stops_and_names_a_finite_checkpoint(tmp_path):
    train(tmp_path, epochs=1)
    huge = OptimizerOptions(lr=1e6, momentum=0.0)
    with pytest.raises(TrainingDiverged) as err:
        train(tmp_path, epochs=4, optimizer=huge, resume=prefix_in(tmp_path))
    message = str(err.value)
    assert "\n" not in message and "Lower --lr" in message
    assert "the last good checkpoint is %s-0001.params" % prefix_in(tmp_path) in message
    assert artifact.epochs(prefix_in(tmp_path)) == [1]
    saved = artifact.load(prefix_in(tmp_path), 1)  # refuses non-finite parameters
    assert all(np.isfinite(v.asnumpy()).all() for v in saved.arg_params.values())


def test_divergence_advice_names_only_flags_the_run_can_still_change(tmp_path):
    """A run already given --clip-gradient and a warm-up is told to lower them, not to add
    them (the message said "add --clip-gradient" to runs that had it)."""
    clipped = OptimizerOptions(lr=1e6, momentum=0.0, clip_gradient=2.0, warmup_epochs=0.5)
    with pytest.raises(TrainingDiverged) as err:
        train(tmp_path, epochs=2, optimizer=clipped)
    message = str(err.value)
    assert "Lower --lr (now " in message and "lower --clip-gradient (now 2)" in message
    assert "add --clip-gradient" not in message and "add --warmup-epochs" not in message


def test_exploding_loss_without_a_checkpoint_says_so(tmp_path):
    with pytest.raises(TrainingDiverged, match="no checkpoint was written yet"):
        train(tmp_path, epochs=2, optimizer=OptimizerOptions(lr=1e6, momentum=0.0))
    assert artifact.epochs(prefix_in(tmp_path)) == []


def test_parameters_turned_non_finite_stop_before_the_save(tmp_path):
    class Poison(Hook):
        """Makes a parameter NaN after the last update of the second epoch."""
        def after_step(self, trainer, epoch, batch_index, losses):
            if (epoch, batch_index) == (1, len(trainer.loader) - 1):
                _, arrays = module_adapter.param_arrays(trainer.module)[0]
                arrays[0][:] = np.nan
                module_adapter.mark_params_changed(trainer.module)

    model = tiny_model()
    hooks = [Poison()] + default_hooks(model, str(tmp_path), progress=False)
    with pytest.raises(TrainingDiverged, match="parameter .* is not finite after epoch 2; "
                                               "the last good checkpoint is .*-0001.params"):
        train(epochs=3, hooks=hooks)
    assert artifact.epochs(prefix_in(tmp_path)) == [1]


def test_a_used_output_folder_needs_resume_or_overwrite(tmp_path):
    train(tmp_path, epochs=3)
    with pytest.raises(OutputFolderInUse) as err:
        train(tmp_path, epochs=1)
    assert str(err.value) == ("%s already holds checkpoints (%s-0001.json): pass --resume auto "
                              "to continue that run (or --resume PREFIX), or --overwrite to "
                              "start a new one there" % (tmp_path, tiny_model().name))
    train(tmp_path, epochs=1, overwrite=True)
    assert artifact.epochs(prefix_in(tmp_path)) == [1]
    with open(prefix_in(tmp_path) + "-log.csv") as stream:
        assert [row["epoch"] for row in csv.DictReader(stream)] == ["1"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "another_model-0004.json").write_text("{}")
    with pytest.raises(OutputFolderInUse, match="another_model-0004.json"):
        train(other, epochs=1)


class ScriptedValidation(Hook):
    only_rank0 = True

    def __init__(self, scores):
        self.scores = scores

    def after_epoch(self, trainer, epoch, row):
        return {"val_map": self.scores[epoch]}


def test_keep_last_keeps_the_newest_and_the_best(tmp_path):
    hooks = [ScriptedValidation([0.2, 0.5, 0.1, 0.3]),
             Checkpointer(prefix_in(tmp_path), keep_last=2)]
    train(epochs=4, hooks=hooks, data=loader(InMemoryDataset(2)))
    prefix = prefix_in(tmp_path)
    assert artifact.epochs(prefix) == [2, 3, 4]
    assert artifact.best_epoch(prefix) == 2
    assert artifact.read_meta(prefix, 4)["best"] == {"epoch": 2, "metric": "voc07_map",
                                                     "value": 0.5}
    assert artifact.load(prefix).epoch == 2


def test_validation_scores_at_its_interval_and_the_last_epoch(tmp_path):
    rows = train(tmp_path, epochs=3, val_dataset=InMemoryDataset(4, seed=1), val_interval=2)
    assert [row.get("val_map") is not None for row in rows] == [False, True, True]
    assert all(0 <= row["val_map"] <= 1 for row in rows[1:])
    with open(prefix_in(tmp_path) + "-log.csv") as stream:
        logged = list(csv.DictReader(stream))
    assert list(logged[0]) == ["epoch", "lr", "samples_per_sec", "cls_loss", "box_loss",
                               "val_map"]
    assert [row["val_map"] == "" for row in logged] == [True, False, False]
    meta = artifact.read_meta(prefix_in(tmp_path), 3)
    assert meta["best"]["epoch"] in (2, 3)
    assert meta["training"]["trainer"]["epochs"] == 3


def test_csv_log_of_a_resumed_run_keeps_the_rows_up_to_its_start(tmp_path):
    path = str(tmp_path / "run-log.csv")
    log = engine_hooks.CSVLog(path, ("cls_loss",))
    log.before_train(types.SimpleNamespace(start_epoch=0))
    for epoch in range(3):
        log.after_epoch(None, epoch, {"epoch": epoch + 1, "lr": 0.1, "samples_per_sec": 9.0,
                                      "cls_loss": 1.0 / (epoch + 1), "extra": "ignored"})
    log.before_train(types.SimpleNamespace(start_epoch=2))
    with open(path) as stream:
        rows = list(csv.DictReader(stream))
    assert [row["epoch"] for row in rows] == ["1", "2"] and rows[1]["cls_loss"] == "0.5"
    assert rows[0]["val_map"] == "" and "extra" not in rows[0]
    log.before_train(types.SimpleNamespace(start_epoch=0))
    with open(path) as stream:
        assert list(csv.DictReader(stream)) == []


def optimizer_arrays(prefix, epoch):
    state = artifact.load_optimizer_state(prefix, epoch)
    return state.info, {k: v.asnumpy() for k, v in state.arrays.items()}


def test_resume_is_bit_exact(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    sgd = OptimizerOptions(lr=0.02, lr_steps=(1,), lr_factor=0.5)
    expected = train(straight, epochs=2, optimizer=sgd)
    train(resumed, epochs=1, optimizer=sgd)
    rows = train(resumed, epochs=2, optimizer=sgd, resume=prefix_in(resumed))
    assert [row["epoch"] for row in rows] == [2]
    assert rows[0]["lr"] == expected[1]["lr"] == 0.01
    assert total_loss(rows[0]) == total_loss(expected[1])
    first, second = (artifact.load(prefix_in(run), 2) for run in (straight, resumed))
    for name, array in {**first.arg_params, **first.aux_params}.items():
        other = {**second.arg_params, **second.aux_params}[name]
        assert np.array_equal(array.asnumpy(), other.asnumpy()), name
    (info, arrays), (info2, arrays2) = (optimizer_arrays(prefix_in(run), 2)
                                        for run in (straight, resumed))
    assert info == info2 and arrays and sorted(arrays) == sorted(arrays2)
    assert all(np.array_equal(arrays[k], arrays2[k]) for k in arrays)
    with open(prefix_in(resumed) + "-log.csv") as stream:
        assert [row["epoch"] for row in csv.DictReader(stream)] == ["1", "2"]


def test_resume_with_another_lr_applies_it_and_says_so_once(tmp_path, caplog):
    train(tmp_path, epochs=1, optimizer=OptimizerOptions(lr=0.01))
    caplog.set_level(logging.INFO, logger="zoo.train")
    rows = train(tmp_path, epochs=2, optimizer=OptimizerOptions(lr=0.02, wd=1e-4),
                 resume=prefix_in(tmp_path))
    lines = [record.getMessage() for record in caplog.records if "resumed" in record.getMessage()]
    assert lines == ["resumed from %s at epoch 1; changed optimizer settings apply: "
                     "lr 0.01 -> 0.02, wd 0.0005 -> 0.0001" % prefix_in(tmp_path)]
    assert rows[0]["lr"] == 0.02
    assert artifact.read_meta(prefix_in(tmp_path), 2)["training"]["optimizer"]["lr"] == 0.02
    assert artifact.load_optimizer_state(prefix_in(tmp_path), 2).info["settings"]["lr"] == 0.02


def test_resume_with_another_optimizer_starts_its_state_afresh(tmp_path, caplog):
    train(tmp_path, epochs=1, optimizer=OptimizerOptions(lr=0.01, lr_steps=(1,)))
    caplog.set_level(logging.INFO, logger="zoo.train")
    rows = train(tmp_path, epochs=2, resume=prefix_in(tmp_path),
                 optimizer=OptimizerOptions(optimizer="adam", lr=0.001, lr_steps=(1,)))
    line, = [r.getMessage() for r in caplog.records if "resumed" in r.getMessage()]
    assert "optimizer sgd -> adam" in line and "the sgd state is dropped, adam starts afresh" in line
    # The schedule went on from the saved update count: past the drop at epoch 1.
    assert rows[0]["lr"] == pytest.approx(0.0001)
    assert artifact.load_optimizer_state(prefix_in(tmp_path), 2).info["settings"][
        "optimizer"] == "adam"


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(artifact.ArtifactError, match="no complete checkpoint .* to resume"):
        train(tmp_path, epochs=1, resume=str(tmp_path / "missing"))


def test_memory_saving_trains_with_the_same_first_loss():
    def first_loss(memory_saving):
        model, data = tiny_model(), loader(InMemoryDataset(2), augment=False)
        options = TrainerOptions(epochs=1, batch_size=2, memory_saving=memory_saving)
        return total_loss(Trainer(model, data, options, OptimizerOptions()).fit()[0])
    assert first_loss(True) == pytest.approx(first_loss(False), rel=1e-5)


def test_freeze_keeps_matching_parameters_fixed():
    model, data = tiny_model(), loader(InMemoryDataset(2))
    trainer = Trainer(model, data, TrainerOptions(epochs=1, batch_size=2, freeze="^conv1_"),
                      OptimizerOptions(lr=0.05))
    trainer.fit()
    initial = tiny_model().init_params(seed=0)[0]
    final = trainer.params()[0]
    assert np.array_equal(initial["conv1_weight"].asnumpy(), final["conv1_weight"].asnumpy())
    assert not np.array_equal(initial["head0_cls_weight"].asnumpy(),
                              final["head0_cls_weight"].asnumpy())
    assert isinstance(trainer.module, mx.mod.Module)


def test_train_job_feeds_faster_rcnn_short_side_batches_and_ssd_stretched_ones(shapes192,
                                                                                 tmp_path):
    options = TrainOptions(network="faster_rcnn_mobilenetv2", dataset="voc", data_root=shapes192,
                           data_shape=128, batch_size=2, epochs=1, val_split="",
                           data_threads=1, output_dir=str(tmp_path), progress=False)
    trainer = make_trainer(options)
    config = trainer.model.config
    assert config["max_size"] == zoo.get_config("faster_rcnn_mobilenetv2")["max_size"] > 128
    assert isinstance(trainer.loader.transform, ShortSideTrainTransform)
    batch = next(iter(trainer.loader))
    side = trainer.loader.dataset.records[0].height  # the embedded images are square
    assert batch.data.shape == (2, 3, 128, 128)
    np.testing.assert_allclose(batch.im_info, [[128, 128, 128 / side]] * 2, rtol=1e-6)
    ssd = make_trainer(dataclasses.replace(options, network="ssd_mobilenetv2", data_shape=192,
                                           max_expand=2.0))
    assert type(ssd.loader.transform) is TrainTransform and ssd.loader.transform.max_expand == 2
    assert next(iter(ssd.loader)).im_info is None


@pytest.mark.parametrize("network, data_shape", [("faster_rcnn_mobilenetv2", 128),
                                                 ("ssd_mobilenetv2", 192)])
def test_no_colour_jitter_leaves_the_pixels_to_flip_and_resize(shapes192, tmp_path, network,
                                                               data_shape):
    # zoo train --no-colour-jitter (as GluonCV's Faster R-CNN transform): two draws of one
    # image differ only by the flip; with the default jitter their colours differ too.
    from zoo.cli import build_parser
    args = build_parser("train").parse_args(["train", "--network", network,
                                             "--no-colour-jitter"])
    assert args.colour_jitter is False
    options = TrainOptions(network=network, dataset="voc", data_root=shapes192,
                           data_shape=data_shape, batch_size=1, epochs=1, val_split="",
                           data_threads=1, output_dir=str(tmp_path), progress=False,
                           max_expand=1.0, crop=False, colour_jitter=False)
    for jitter in (False, True):
        loader = make_trainer(dataclasses.replace(options, colour_jitter=jitter)).loader
        assert loader.transform.colour is jitter
        image, label = loader.dataset[0]
        draws = [loader.transform(image, label, np.random.RandomState(seed))[0]
                 for seed in range(6)]
        means = sorted({round(float(np.asarray(draw).mean()), 3) for draw in draws})
        assert (len(means) == 1) is (not jitter)
