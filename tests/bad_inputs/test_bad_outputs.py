"""Bad-input corpus, outputs: one writer per output, and no command's failure changes a file
that was good before it. Every failing command here runs through the CLI; the sha256 of
every file in its folder is taken before and after, and must not change."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import zoo
from zoo import artifact
from zoo.cli import main
from zoo.data import embedded

from factories import tree_hashes

from factories import ROOT
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
NETWORK = "ssd_mobilenetv2_stride8"


def small_model(seed):
    model = zoo.get_model(NETWORK, data_shape=128, num_classes=len(embedded.CLASSES),
                          class_names=list(embedded.CLASSES))
    model.init_params(seed=seed)
    return model


@pytest.fixture
def fp32(tmp_path):
    """An fp32 artifact of epochs 1 and 2 (other parameters each) at ``<tmp>/run/ssd``."""
    prefix = str(tmp_path / "run" / "ssd")
    for epoch in (1, 2):
        model = small_model(seed=epoch)
        artifact.save(prefix, epoch, model, model.arg_params, model.aux_params)
    return prefix


def fails_cleanly(argv, capsys, status=1):
    """Run ``zoo ARGV``; it must fail with ``status`` in one line; returns the line."""
    assert main([str(a) for a in argv]) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def unchanged_after(folder, argv, capsys, status=1):
    """Run a failing ``zoo ARGV``; no file under ``folder`` may change. Returns its line."""
    before = tree_hashes(folder)
    assert before, "nothing to protect under %s" % folder
    line = fails_cleanly(argv, capsys, status)
    assert tree_hashes(folder) == before, line
    return line


def quantize_argv(checkpoint, shapes, *more):
    return ["quantize", "--checkpoint", checkpoint, "--dataset", "voc", "--data-root", shapes,
            "--split", "train", "--calib-batches", "1", "--batch-size", "2", *more]


# -- Outputs never destroy inputs: quantization ----------------------------------------------

def test_quantizing_onto_the_fp32_prefix_is_refused_and_changes_nothing(fp32, shapes, capsys):
    line = unchanged_after(os.path.dirname(fp32),
                           quantize_argv(fp32, shapes, "--output", fp32), capsys)
    assert "the output is the fp32 artifact's own prefix" in line


def test_quantizing_onto_another_artifacts_prefix_is_refused(fp32, shapes, tmp_path, capsys):
    other = str(tmp_path / "other" / "ssd")
    model = small_model(seed=9)
    artifact.save(other, 7, model, model.arg_params, model.aux_params)
    line = unchanged_after(str(tmp_path), quantize_argv(fp32, shapes, "--output", other),
                           capsys)
    assert "holds epoch 7 of another artifact (fp32)" in line


def test_an_int8_epoch_keeps_its_meaning_when_another_is_added(fp32, shapes, capsys):
    int8 = fp32 + "-int8"
    assert main(quantize_argv(fp32, shapes, "--epoch", "1")) == 0
    first = artifact.load(int8, 1)
    graph, files = first.symbol.tojson(), tree_hashes(os.path.dirname(int8))
    assert main(quantize_argv(fp32, shapes, "--epoch", "2")) == 0
    second = artifact.load(int8, 2)
    assert second.symbol.tojson() != graph, "the epochs' calibrations should differ"
    # Epoch 1 still loads the graph it was calibrated with, byte for byte.
    assert artifact.load(int8, 1).symbol.tojson() == graph
    assert {k: v for k, v in tree_hashes(os.path.dirname(int8)).items()
            if "-0001" in k} == {k: v for k, v in files.items() if "-0001" in k}
    # Quantizing epoch 1 again would replace it: refused.
    line = unchanged_after(os.path.dirname(int8), quantize_argv(fp32, shapes, "--epoch", "1"),
                           capsys)
    assert "already holds int8 epoch 1" in line


def test_an_int8_epoch_whose_graph_was_replaced_is_refused(fp32, shapes, tmp_path):
    int8 = fp32 + "-int8"
    assert main(quantize_argv(fp32, shapes, "--epoch", "1")) == 0
    graph = artifact.epoch_files(int8, 1).graph
    with open(graph) as stream:
        text = stream.read()
    changed = re.sub(r'"min_calib_range": "[^"]*"', '"min_calib_range": "-9.5"', text, count=1)
    assert changed != text
    with open(graph, "w") as stream:  # another calibration's threshold
        stream.write(changed)
    with pytest.raises(artifact.ArtifactError, match="not the graph .*-0001.json was saved "
                                                     "with"):
        artifact.load(int8, 1)


# -- Outputs never destroy inputs: export -----------------------------------------------------

@pytest.fixture
def exported(fp32, tmp_path):
    """A good ONNX export of ``fp32`` at ``<tmp>/deploy/ssd.onnx``; returns its prefix."""
    prefix = str(tmp_path / "deploy" / "ssd")
    assert main(["export", "--checkpoint", fp32, "--format", "onnx", "--output", prefix]) == 0
    return prefix


def test_an_onnx_export_verified_on_a_missing_image_replaces_nothing(fp32, exported, tmp_path,
                                                                     capsys):
    line = unchanged_after(str(tmp_path), [
        "export", "--checkpoint", fp32, "--epoch", "1", "--format", "onnx", "--output",
        exported, "--verify", tmp_path / "missing.jpg"], capsys)
    assert "missing.jpg: no such image to verify the export on (nothing was written)" in line


def test_an_onnx_export_verified_on_an_unreadable_image_replaces_nothing(fp32, exported,
                                                                         tmp_path, capsys):
    bad = tmp_path / "images" / "truncated.jpg"
    bad.parent.mkdir()
    bad.write_bytes(b"\xff\xd8\xff\xe0 not a whole jpeg")
    unchanged_after(str(tmp_path), [
        "export", "--checkpoint", fp32, "--epoch", "1", "--format", "onnx", "--output",
        exported, "--verify", bad], capsys)
    assert not os.path.exists(exported + ".unverified.onnx")


# -- One writer per output --------------------------------------------------------------------

def holder(lock_file):
    """A process holding ``lock_file`` (as a zoo command would) until its stdin closes."""
    code = ("import sys; from zoo import runlock\n"
            "with runlock.hold(sys.argv[1], 'x'):\n"
            "    print('held', flush=True); sys.stdin.read()\n")
    process = subprocess.Popen([sys.executable, "-c", code, lock_file], env=ENV,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "held\n"
    return process


def train_argv(shapes, output, epochs=1):
    return ["train", "--network", NETWORK, "--dataset", "voc", "--data-root", shapes,
            "--data-shape", "128", "--batch-size", "2", "--epochs", str(epochs),
            "--val-split", "", "--output-dir", str(output), "--no-progress",
            "--data-threads", "1"]


@pytest.mark.parametrize("command", ["train", "quantize", "export"])
def test_a_busy_output_fails_at_once_naming_its_holder(command, fp32, shapes, tmp_path,
                                                       capsys):
    from zoo import runlock
    output = tmp_path / "busy"
    argv, lock = {
        "train": (train_argv(shapes, output), runlock.train_lock_path(str(output))),
        "quantize": (quantize_argv(fp32, shapes, "--output", output / "q"),
                     runlock.lock_path(str(output / "q"))),
        "export": (["export", "--checkpoint", fp32, "--output", output / "e"],
                   runlock.lock_path(str(output / "e")))}[command]
    process = holder(lock)
    try:
        start = time.time()
        line = unchanged_after(str(output), argv, capsys)
        assert time.time() - start < 30
        assert "is in use by pid %d on " % process.pid in line
        assert "one writer at a time" in line
    finally:
        process.kill()
        process.wait()
    # The holder crashed (SIGKILL): its lock went with it, and the command now runs.
    assert main([str(a) for a in argv]) == 0
    assert not os.path.exists(lock), "a finished command leaves no lock file"


def test_the_lock_is_released_when_the_command_fails(shapes, tmp_path, capsys):
    from zoo import runlock
    output = tmp_path / "run"
    fails_cleanly(train_argv(shapes, output) + ["--batch-size", "64"], capsys)
    with runlock.hold(runlock.train_lock_path(str(output)), "again"):
        pass


def test_two_concurrent_trainings_leave_one_run_and_one_error(shapes, tmp_path, capsys):
    """The first run is paused (SIGSTOP) while it holds the folder, so that the second
    surely starts while it trains; it then finishes as if alone."""
    output = tmp_path / "run"
    lock = str(output / "train.lock")
    first = subprocess.Popen([sys.executable, "-m", "zoo"] + train_argv(shapes, output, 2),
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not (os.path.exists(lock) and os.path.getsize(lock)) and time.time() < deadline:
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)
        assert os.path.exists(lock), "the first run ended before it could be paused"
        line = unchanged_after(str(output), train_argv(shapes, output, 2), capsys)
        assert "output folder %s is in use by pid %d" % (output, first.pid) in line
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    prefix = str(output / NETWORK)
    assert artifact.epochs(prefix) == [1, 2]
    with open(prefix + "-log.csv") as stream:
        epochs = [line.split(",")[0] for line in stream.read().splitlines()[1:]]
    assert epochs == ["1", "2"]
    artifact.load(prefix, 2)


def test_the_holder_record_names_pid_host_and_command(tmp_path):
    from zoo import runlock
    lock = str(tmp_path / "x.lock")
    with runlock.hold(lock, "x"):
        with open(lock) as stream:
            record = stream.read()
        assert '"pid": %d' % os.getpid() in record and '"host"' in record
        assert '"command"' in record
        with pytest.raises(zoo.errors.OutputLocked, match="x is in use by pid %d"
                           % os.getpid()):
            with runlock.hold(lock, "x"):
                pass
    assert not os.path.exists(lock)


def test_an_export_onto_its_own_artifact_is_refused(fp32, capsys):
    line = unchanged_after(os.path.dirname(fp32), ["export", "--checkpoint", fp32, "--output",
                                                   fp32], capsys)
    assert "the output is the artifact it exports" in line


def test_an_export_of_another_graph_beside_older_epochs_is_refused(fp32, tmp_path, capsys):
    deploy = str(tmp_path / "deploy" / "ssd")
    assert main(["export", "--checkpoint", fp32, "--epoch", "1", "--output", deploy]) == 0
    # The portable graph would replace the fused one epoch 1 runs with.
    line = unchanged_after(str(tmp_path / "deploy"), [
        "export", "--checkpoint", fp32, "--epoch", "2", "--no-fuse", "--output", deploy],
        capsys)
    assert "epoch 1 runs with another graph" in line
    assert artifact.load(deploy, 1).epoch == 1
