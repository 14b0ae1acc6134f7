"""tools/train.py, eval.py, demo.py on tiny embedded datasets the tests generate."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo import checkpoint
from zoo.data import embedded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_tool(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tools", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.join(ROOT, "tools"))
    return module


train_tool, eval_tool, demo_tool = load_tool("train"), load_tool("eval"), load_tool("demo")


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A tiny embedded dataset: 8 training and 4 held-out images of 192 pixels."""
    return embedded.generate(str(tmp_path_factory.mktemp("shapes")), seed=1, num_train=8,
                             num_val=4, image_size=192)


def train_flags(shapes, output, *extra, network="ssd_mobilenetv2", shape="192"):
    return ["--network", network, "--dataset", "voc", "--data-root", shapes,
            "--output-dir", str(output), "--data-shape", shape, "--batch-size", "4",
            "--epochs", "1", "--no-progress", "--data-threads", "2"] + list(extra)


def test_flags_reach_model_optimizer_and_loader(shapes, tmp_path, monkeypatch):
    flags = train_flags(shapes, tmp_path, "--optimizer", "nag", "--lr", "0.03", "--wd", "1e-3",
                        "--momentum", "0.8", "--clip-gradient", "5", "--lr-steps", "2,3",
                        "--lr-factor", "0.5", "--warmup-epochs", "1", "--freeze", "^conv1_",
                        "--seed", "7", "--max-expand", "1.5", "--kv-store", "local",
                        "--data-shape", "256", "--no-crop")
    trainer = train_tool.make_trainer(train_tool.parse_args(flags))
    config = trainer.model.config
    assert config["data_shape"] == 256 and config["num_classes"] == len(embedded.CLASSES)
    assert config["class_names"] == list(embedded.CLASSES)
    module = trainer.build_module()
    assert module.data_shapes[0].shape == (4, 3, 256, 256)
    assert set(module._fixed_param_names) == {"conv1_weight", "conv1_bn_gamma", "conv1_bn_beta"}
    optimizer = trainer.optimizer(steps_per_epoch=2)
    assert isinstance(optimizer, mx.optimizer.NAG)
    assert (optimizer.lr, optimizer.wd, optimizer.momentum, optimizer.clip_gradient) == (
        0.03, 1e-3, 0.8, 5.0)
    assert optimizer.lr_scheduler.step == [4, 6] and optimizer.lr_scheduler.factor == 0.5
    assert optimizer.lr_scheduler.warmup_steps == 2
    loader = trainer.loader
    assert (loader.seed, loader.num_workers, loader.batch_size) == (7, 2, 4)
    assert loader.transform.max_expand == 1.5 and loader.transform.min_ious == (None,)
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    with pytest.raises(zoo.PretrainedNotFound):
        train_tool.make_trainer(train_tool.parse_args(flags + ["--pretrained-backbone"]))
    assert train_tool.main(flags + ["--network", "ssd_mobilenetv2", "--data-shape", "100"]) == 1


def params_of(prefix, epoch):
    return checkpoint.load(prefix, epoch)[:2]


def assert_same_params(first, second):
    for a, b in zip(first, second):
        assert sorted(a) == sorted(b)
        for key in a:
            assert np.array_equal(a[key].asnumpy(), b[key].asnumpy()), key


def test_resume_is_bit_exact(shapes, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    common = ["--val-set", "", "--lr", "0.01"]
    assert train_tool.main(train_flags(shapes, straight, "--epochs", "2", *common)) == 0
    assert train_tool.main(train_flags(shapes, resumed, "--epochs", "1", *common)) == 0
    assert train_tool.main(train_flags(shapes, resumed, "--epochs", "2", "--resume", "auto",
                                       *common)) == 0
    prefix = "ssd_mobilenetv2"
    assert_same_params(params_of(str(straight / prefix), 2), params_of(str(resumed / prefix), 2))
    optimizer_states = [checkpoint.load(str(run / prefix), 2)[2] for run in (straight, resumed)]
    assert optimizer_states[0] and optimizer_states[0] == optimizer_states[1]
    log = (resumed / (prefix + "-log.csv")).read_text().splitlines()
    assert [row.split(",")[0] for row in log[1:]] == ["1", "2"]


KILL_DURING_SAVE = textwrap.dedent("""
    import os, runpy, signal, sys
    real_replace = os.replace
    def replace(src, dst):
        if dst.endswith("-0002.params"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real_replace(src, dst)
    os.replace = replace
    sys.argv = ["train.py"] + sys.argv[1:]
    runpy.run_path(os.path.join(%r, "tools", "train.py"), run_name="__main__")
""" % ROOT)


def test_kill_during_save_keeps_previous_checkpoint(shapes, tmp_path):
    flags = train_flags(shapes, tmp_path, "--epochs", "2", "--val-set", "")
    killed = subprocess.run([sys.executable, "-c", KILL_DURING_SAVE] + flags,
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert killed.returncode == -9
    prefix = str(tmp_path / "ssd_mobilenetv2")
    assert checkpoint.latest_epoch(prefix) == 1
    assert any(name.startswith("ssd_mobilenetv2-0002.params.tmp") for name in os.listdir(tmp_path))
    assert train_tool.main(flags + ["--resume", "auto"]) == 0
    assert checkpoint.latest_epoch(prefix) == 2


def test_exploding_loss_stops_with_a_clear_message(shapes, tmp_path, capsys):
    flags = train_flags(shapes, tmp_path, "--epochs", "2", "--val-set", "", "--lr", "1e6",
                        "--optimizer", "sgd", "--momentum", "0")
    assert train_tool.main(flags) == 1
    err = capsys.readouterr().err
    assert "train.py: error: loss" in err and "--lr" in err
    assert "\n" not in err.strip()


def test_evaluation_scores_every_image_and_demo_draws(shapes, tmp_path, capsys):
    assert train_tool.main(train_flags(shapes, tmp_path)) == 0
    prefix = str(tmp_path / "ssd_mobilenetv2")
    output = tmp_path / "eval.json"
    assert eval_tool.main(["--checkpoint", prefix, "--dataset", "voc", "--data-root", shapes,
                           "--split", "val", "--output", str(output), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "4 images" in out and "mAP" in out and "COCO AP" in out
    results = __import__("json").loads(output.read_text())
    assert results["images"] == 4
    assert set(results["voc"]) == {"voc07", "voc_area"}
    assert 0 <= results["voc"]["voc07"]["mAP"] <= 1
    picture = tmp_path / "demo.png"
    image = os.path.join(shapes, "JPEGImages", "000008.jpg")
    assert demo_tool.main(["--checkpoint", prefix, "--image", image, "--output", str(picture),
                           "--threshold", "0.0"]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


SMALL_SHAPES = {"ssd_resnet50": "300", "ssd_resnet101": "300", "ssd_inceptionv3": "300",
                "ssd_mobilenetv2": "192"}


@pytest.mark.parametrize("network", sorted(zoo.list_models()))
def test_every_model_trains_and_evaluates(network, shapes, tmp_path):
    shape = SMALL_SHAPES.get(network, "160")
    flags = train_flags(shapes, tmp_path, "--val-set", "", "--batch-size", "2", network=network,
                        shape=shape)
    flags += ["--train-set", "val"]
    assert train_tool.main(flags) == 0
    prefix = str(tmp_path / network)
    assert checkpoint.latest_epoch(prefix) == 1
    assert eval_tool.main(["--checkpoint", prefix, "--dataset", "voc", "--data-root", shapes,
                           "--split", "val", "--batch-size", "2", "--no-progress"]) == 0
