"""Faults during training: SIGINT and SIGTERM stop at a batch boundary with one line and the
last complete checkpoint intact, a full disk loses no saved epoch, a failing validation
keeps its epoch's checkpoint (and a bad validation image stops the run before its first
epoch, or is skipped), and a killed save's leftovers go on the next start (the
divergence stop naming a finite checkpoint: tests/zoo/engine/test_trainer.py)."""
import errno
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import mxnet as mx
import pytest

from test_trainer import InMemoryDataset, loader, prefix_in, tiny_model, train
from zoo import artifact
from zoo.cli import main
from zoo.engine.hooks import Hook, default_hooks
from zoo.engine.trainer import (OptimizerOptions, Trainer, TrainerOptions, TrainingError,
                                TrainingInterrupted)
from zoo.errors import DataError
from zoo.jobs import train as train_job

from factories import ROOT
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
NETWORK = "ssd_mobilenetv2_stride8"


def train_argv(shapes, output, epochs=3):
    return ["train", "--network", NETWORK, "--dataset", "voc", "--data-root", shapes,
            "--data-shape", "128", "--batch-size", "2", "--epochs", str(epochs),
            "--output-dir", str(output), "--no-progress", "--data-threads", "1"]


def error_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


class Signal(Hook):
    """Sends ``signals`` to this process after step ``batch`` of epoch ``epoch``."""

    def __init__(self, epoch, batch, *signals):
        self.at, self.signals = (epoch, batch), signals

    def after_step(self, trainer, epoch, batch_index, losses):
        if (epoch, batch_index) == self.at:
            for signum in self.signals:
                os.kill(os.getpid(), signum)


def with_hook(monkeypatch, hook):
    """Make ``zoo train`` run ``hook`` after its default hooks."""
    real = train_job.default_hooks
    monkeypatch.setattr(train_job, "default_hooks",
                        lambda *args, **kwargs: real(*args, **kwargs) + [hook])


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_at_a_batch_boundary_with_the_checkpoint_intact(
        shapes, tmp_path, monkeypatch, capsys, signum, status):
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with_hook(monkeypatch, Signal(1, 2, signum))
    assert main(train_argv(shapes, tmp_path)) == status
    prefix = str(tmp_path / NETWORK)
    assert error_line(capsys) == ("zoo train: error: stopped by %s at epoch 2, batch 3; last "
                                  "complete checkpoint: %s-0001"
                                  % (signal.Signals(signum).name, prefix))
    assert artifact.epochs(prefix) == [1]
    assert artifact.load(prefix, 1).epoch == 1 and artifact.load_optimizer_state(prefix, 1)
    assert not glob.glob(prefix + "*.tmp-*")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    if signum == signal.SIGINT:
        # After Ctrl-C, a new run there is refused naming the flag that continues it.
        monkeypatch.undo()
        assert main(train_argv(shapes, tmp_path)) == 1
        assert error_line(capsys) == (
            "zoo train: error: %s already holds checkpoints (%s-0001.json): pass --resume auto "
            "to continue that run (or --resume PREFIX), or --overwrite to start a new one "
            "there" % (tmp_path, NETWORK))
        assert main(train_argv(shapes, tmp_path, epochs=2) + ["--resume", "auto"]) == 0
        assert artifact.epochs(prefix) == [1, 2]


def test_a_signal_before_any_checkpoint_says_so(tmp_path):
    with pytest.raises(TrainingInterrupted) as err:
        train(tmp_path, epochs=2, hooks=[Signal(0, 0, signal.SIGINT)])
    assert str(err.value) == "stopped by SIGINT at epoch 1, batch 1"
    assert err.value.exit_status == 130


def test_a_signal_during_the_epochs_hooks_stops_after_them(tmp_path):
    class SignalAtEpochEnd(Hook):
        def after_epoch(self, trainer, epoch, row):
            os.kill(os.getpid(), signal.SIGTERM)

    model = tiny_model()
    hooks = [SignalAtEpochEnd()] + default_hooks(model, str(tmp_path), progress=False)
    with pytest.raises(TrainingInterrupted, match="^stopped by SIGTERM after epoch 1$"):
        train(epochs=3, hooks=hooks)
    # The checkpoint hook after the signal still saved the epoch.
    assert artifact.epochs(prefix_in(tmp_path)) == [1]


def test_a_second_sigint_does_not_wait_for_the_batch(shapes, tmp_path, monkeypatch, capsys):
    with_hook(monkeypatch, Signal(0, 1, signal.SIGINT, signal.SIGINT))
    assert main(train_argv(shapes, tmp_path)) == 130
    assert error_line(capsys) == "zoo train: error: interrupted by SIGINT"


def test_sigterm_from_another_process(shapes, tmp_path):
    """What `kill` or a scheduler does: the process ends with 143 and one line, its last
    complete checkpoint loadable."""
    prefix = str(tmp_path / NETWORK)
    process = subprocess.Popen([sys.executable, "-m", "zoo"] + train_argv(shapes, tmp_path, 50),
                               cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        deadline = time.time() + 120
        while not artifact.epochs(prefix) and time.time() < deadline:
            assert process.poll() is None, process.communicate()[1][-2000:]
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 143, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("zoo train: error: stopped by SIGTERM "), err[-2000:]
    assert "Traceback" not in err
    complete = artifact.epochs(prefix)
    assert last.endswith("last complete checkpoint: %s-%04d" % (prefix, complete[-1]))
    assert artifact.load(prefix, complete[-1]).epoch == complete[-1]


def full_disk_at(path_part, error):
    """A ``mx.nd.save`` that writes half a file, then fails as a full disk does, for paths
    containing ``path_part``."""
    real = mx.nd.save

    def save(path, arrays):
        if path_part not in path:
            return real(path, arrays)
        with open(path, "wb") as stream:
            stream.write(b"\0" * 100)
        raise error
    return save


@pytest.mark.parametrize("error, reason", [
    (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), os.strerror(errno.ENOSPC)),
    (mx.base.MXNetError("[12:00:00] src/io/local_filesys.cc:166: Check failed: "
                        "No space left on device"), "No space left on device")],
    ids=["OSError", "MXNetError"])
def test_a_full_disk_keeps_the_previous_checkpoint(shapes, tmp_path, monkeypatch, capsys,
                                                   error, reason):
    monkeypatch.setattr(mx.nd, "save", full_disk_at("-0002.params", error))
    assert main(train_argv(shapes, tmp_path)) == 1
    prefix = str(tmp_path / NETWORK)
    line = error_line(capsys)
    assert line.startswith("zoo train: error: epoch 2 could not be saved: %s-0002.params: "
                           "cannot be written (" % prefix), line
    assert reason in line
    assert line.endswith("; last complete checkpoint: %s-0001" % prefix)
    assert artifact.epochs(prefix) == [1] and artifact.load(prefix).epoch == 1
    # Neither the temporary file nor the incomplete epoch's other files are left.
    assert sorted(os.path.basename(p) for p in glob.glob(prefix + "-0002*")) == []
    assert not glob.glob(prefix + "*.tmp-*")


@pytest.mark.parametrize("failing", ["-0002.json", "-symbol.json"])
def test_a_full_disk_writing_the_metadata_or_the_graph(tiny_saved, failing):
    prefix, model = tiny_saved
    real = os.fsync

    def fsync(fd):
        if re.search(r"%s\.tmp-%d-\d+$" % (re.escape(failing), os.getpid()),
                     os.readlink("/proc/self/fd/%d" % fd)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", fsync)
        with pytest.raises(artifact.ArtifactError) as err:
            artifact.save(prefix, 2, model, model.arg_params, model.aux_params)
    assert str(err.value) == "%s%s: cannot be written (No space left on device)" % (prefix,
                                                                                     failing)
    assert artifact.epochs(prefix) == [1] and not glob.glob(prefix + "-0002*")
    assert not glob.glob(prefix + "*.tmp-*")
    assert artifact.load(prefix).epoch == 1


@pytest.fixture
def tiny_saved(tmp_path):
    model = tiny_model()
    model.init_params(seed=0)
    prefix = str(tmp_path / "tiny")
    artifact.save(prefix, 1, model, model.arg_params, model.aux_params)
    return prefix, model


class UnreadableAt(InMemoryDataset):
    """A validation set whose image ``bad`` cannot be decoded."""

    def __init__(self, count, bad):
        super().__init__(count, seed=1)
        self.bad = bad

    def __getitem__(self, index):
        if index == self.bad:
            raise DataError("val/%06d.jpg: not a decodable image" % index)
        return super().__getitem__(index)


def test_a_failing_validation_keeps_the_epochs_checkpoint(tmp_path):
    with pytest.raises(TrainingError) as err:
        train(tmp_path, epochs=3, val_dataset=UnreadableAt(4, bad=2))
    assert str(err.value) == ("validation after epoch 1 failed, training stopped once the "
                              "epoch was saved: val/000002.jpg: not a decodable image")
    prefix = prefix_in(tmp_path)
    assert artifact.epochs(prefix) == [1]
    loaded = artifact.load(prefix, 1)
    assert loaded.meta["best"] is None  # no score recorded for a validation that failed
    with open(prefix + "-log.csv") as stream:
        assert len(stream.read().splitlines()) == 2  # the header and epoch 1


def test_an_interrupted_saves_leftovers_go_on_the_next_start(tmp_path):
    train(tmp_path, epochs=1)
    prefix = prefix_in(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    leftovers = [prefix + "-0002.params.tmp-" + dead, prefix + "-symbol.json.tmp-" + dead]
    for path in leftovers:
        with open(path, "wb") as stream:
            stream.write(b"half")
    train(tmp_path, epochs=2, resume=prefix)
    assert not any(os.path.exists(path) for path in leftovers)
    assert artifact.epochs(prefix) == [1, 2]


def test_the_handlers_are_restored_after_a_normal_run():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    model = tiny_model()
    data = loader(InMemoryDataset(2))
    Trainer(model, data, TrainerOptions(epochs=1, batch_size=2), OptimizerOptions()).fit()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_ctrl_c_outside_training_is_one_line_exit_130(tiny_saved, tmp_path, monkeypatch, capsys):
    from zoo.jobs import evaluate as evaluate_job

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(evaluate_job, "open_for_artifact", interrupted)
    prefix, _ = tiny_saved
    assert main(["eval", "--checkpoint", prefix, "--data-root", str(tmp_path)]) == 130
    assert error_line(capsys) == "zoo eval: error: interrupted by SIGINT"


def test_a_full_disk_writing_the_log_keeps_the_epochs_checkpoint(tmp_path, monkeypatch):
    import builtins
    real_open = builtins.open

    def full_disk_open(path, mode="r", *args, **kwargs):
        if str(path).endswith("-log.csv") and mode == "a":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full_disk_open)
    with pytest.raises(TrainingError) as err:
        train(tmp_path, epochs=2)
    assert str(err.value) == ("%s-log.csv: cannot be written (No space left on device); the "
                              "checkpoint of epoch 1 is saved" % prefix_in(tmp_path))
    assert artifact.epochs(prefix_in(tmp_path)) == [1]


def with_bad_val_image(shapes, tmp_path):
    """A copy of ``shapes`` whose second validation image is a JPEG cut short with an end
    marker appended: its header reads, so only decoding it finds the fault. Returns the
    copy and the image's path."""
    root = shutil.copytree(shapes, str(tmp_path / "data"))
    with open(os.path.join(root, "ImageSets", "Main", "val.txt")) as stream:
        path = os.path.join(root, "JPEGImages", stream.read().split()[1] + ".jpg")
    with open(path, "rb") as stream:
        jpeg = stream.read()
    with open(path, "wb") as stream:
        stream.write(jpeg[:int(len(jpeg) * 0.7)] + b"\xff\xd9")
    return root, path


def test_a_bad_validation_image_stops_before_the_first_epoch(shapes, tmp_path, monkeypatch,
                                                             capsys):
    root, path = with_bad_val_image(shapes, tmp_path)
    monkeypatch.setattr(Trainer, "fit", lambda *args: pytest.fail("training started"))
    assert main(train_argv(root, tmp_path / "out")) == 1
    assert error_line(capsys) == ("zoo train: error: %s: corrupt JPEG: Corrupt JPEG data: "
                                  "premature end of data segment; --skip-bad skips such an "
                                  "image with a warning" % path)
    assert not os.path.exists(tmp_path / "out") or not os.listdir(tmp_path / "out")


def test_skip_bad_drops_a_bad_validation_image_for_training_and_eval(shapes, tmp_path, capsys):
    root, path = with_bad_val_image(shapes, tmp_path)
    output = tmp_path / "out"
    with pytest.warns(UserWarning) as caught:
        # 1 of the 4 validation images: more than --max-skipped's default 20%
        assert main(train_argv(root, output, epochs=1) + ["--skip-bad", "--max-skipped",
                                                          "0.25"]) == 0
    messages = [str(w.message) for w in caught if "skipped" in str(w.message)]
    assert messages == ["%s: skipped 1 bad record; first: %s: corrupt JPEG: Corrupt JPEG "
                        "data: premature end of data segment"
                        % (os.path.join(root, "ImageSets", "Main", "val.txt"), path)]
    prefix = str(output / NETWORK)
    assert artifact.epochs(prefix) == [1] and artifact.load(prefix).meta["best"] is not None
    capsys.readouterr()
    eval_argv = ["eval", "--checkpoint", prefix, "--data-root", root, "--no-progress"]
    assert main(eval_argv) == 1  # strict: the loader stops at the bad image
    line = error_line(capsys)
    assert line.startswith("zoo eval: error: %s: corrupt JPEG" % path)
    assert line.endswith("; --skip-bad skips such an image with a warning")
    with pytest.warns(UserWarning, match=r"val\.txt: skipped 1 bad record; first: .*corrupt"):
        assert main(eval_argv + ["--skip-bad"]) == 0
    assert capsys.readouterr().out.startswith("3 images of %s/val, epoch 1" % root)
    with open(prefix + "-eval-val.json") as stream:
        assert json.load(stream)["images"] == 3


# -- "Last good" means evaluated good ---------------------------------------------------------

class Blowup(Hook):
    """After the last update of epoch ``epoch``, scales every parameter by 1e4: finite, but
    exploded, as a step at a huge learning rate leaves them (the epoch is saved so)."""

    def __init__(self, epoch):
        self.epoch = epoch

    def after_step(self, trainer, epoch, batch_index, losses):
        if (epoch, batch_index) == (self.epoch, len(trainer.loader) - 1):
            from zoo.engine import module_adapter
            for _, arrays in module_adapter.param_arrays(trainer.module):
                for array in arrays:
                    array *= 1e4
            module_adapter.mark_params_changed(trainer.module)


def diverged_after_blowup(tmp_path, epoch, epochs):
    from zoo.engine.trainer import TrainingDiverged
    model = tiny_model()
    hooks = [Blowup(epoch)] + default_hooks(model, str(tmp_path), progress=False)
    with pytest.raises(TrainingDiverged) as caught:
        train(epochs=epochs, hooks=hooks)
    assert artifact.epochs(prefix_in(tmp_path))[-1] == epoch + 1, "the exploded epoch is saved"
    return str(caught.value)


def test_the_checkpoint_saved_after_the_blowup_is_never_named_good(tmp_path):
    message = diverged_after_blowup(tmp_path, epoch=1, epochs=4)
    assert "the last good checkpoint is %s-0001.params" % prefix_in(tmp_path) in message
    assert "-0002.params" not in message and "\n" not in message


def test_without_an_evaluated_checkpoint_none_is_named_good(tmp_path):
    message = diverged_after_blowup(tmp_path, epoch=0, epochs=3)
    assert ("no checkpoint is known to be good (%s-0001.params was saved but its loss was "
            "never evaluated)" % prefix_in(tmp_path)) in message
    assert "last good checkpoint is" not in message
