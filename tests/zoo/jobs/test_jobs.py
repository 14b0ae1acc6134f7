"""The train, evaluate, demo, quantize and export jobs (zoo.jobs) on tiny embedded datasets
the tests generate; the command line over them is tested in test_cli.py."""
import dataclasses
import glob
import json
import os
import subprocess
import sys
import textwrap
import warnings

import mxnet as mx
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.cli import main as zoo_main
from zoo.data import embedded
from zoo.data.factory import open_dataset
from zoo.engine.trainer import OutputFolderInUse, TrainingDiverged
from zoo.errors import HealthWarning
from zoo.jobs.demo import DemoOptions, demo
from zoo.jobs.evaluate import EvalOptions, evaluate, format_table
from zoo.jobs.export import ExportOptions, export
from zoo.jobs.quantize import QuantizeOptions, quantize
from zoo.jobs.train import TrainOptions, make_trainer, train
from zoo.onnx.runtime import load_onnx_detector
from zoo.predictor import bf16_unavailable

from conftest import END_TO_END_RUNS

from factories import ROOT


def train_options(shapes192, output, network="ssd_mobilenetv2", data_shape=192, **changes):
    """One epoch of ``network`` on the tiny dataset, batches of 4 at lr 0.0025 (0.2.0's
    default 0.01 under the SSD loss then, 4x smaller), no progress bar."""
    settings = dict(network=network, dataset="voc", data_root=shapes192, output_dir=str(output),
                    data_shape=data_shape, batch_size=4, epochs=1, lr=0.0025, progress=False,
                    data_threads=2)
    return TrainOptions(**{**settings, **changes})


def train_flags(shapes192, output, *extra, network="ssd_mobilenetv2", shape="192"):
    """The command-line flags of :func:`train_options`."""
    return ["--network", network, "--dataset", "voc", "--data-root", shapes192,
            "--output-dir", str(output), "--data-shape", shape, "--batch-size", "4",
            "--epochs", "1", "--no-progress", "--data-threads", "2"] + list(extra)


def test_options_reach_model_optimizer_and_loader(shapes192, tmp_path, monkeypatch):
    options = train_options(shapes192, tmp_path, optimizer="nag", lr=0.03, wd=1e-3, momentum=0.8,
                            clip_gradient=5.0, lr_steps=(2.0, 3.0), lr_factor=0.5,
                            warmup_epochs=1.0, freeze="^conv1_", seed=7, max_expand=1.5,
                            data_shape=256, crop=False)
    trainer = make_trainer(options)
    config = trainer.model.config
    assert config["data_shape"] == 256 and config["num_classes"] == len(embedded.CLASSES)
    assert config["class_names"] == list(embedded.CLASSES)
    module = trainer.build_module()
    assert module.data_shapes[0].shape == (4, 3, 256, 256)
    assert set(module._fixed_param_names) == {"conv1_weight", "conv1_bn_gamma", "conv1_bn_beta"}
    optimizer = trainer.build_optimizer(steps_per_epoch=2)
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
        make_trainer(dataclasses.replace(options, pretrained_backbone=True))
    with pytest.raises(zoo.ConfigError, match="data shape 100"):
        train(dataclasses.replace(options, data_shape=100))
    with pytest.raises(zoo.ConfigError, match="no_such_model"):
        train(dataclasses.replace(options, network="no_such_model"))


def assert_same_params(first, second):
    for a, b in zip(first, second):
        assert sorted(a) == sorted(b)
        for key in a:
            assert np.array_equal(a[key].asnumpy(), b[key].asnumpy()), key


def params_of(prefix, epoch):
    loaded = artifact.load(prefix, epoch)
    return loaded.arg_params, loaded.aux_params


def test_resume_is_bit_exact(shapes192, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    result = train(train_options(shapes192, straight, epochs=2, val_split=""))
    assert result.prefix == str(straight / "ssd_mobilenetv2") and result.best_epoch is None
    assert [row["epoch"] for row in result.rows] == [1, 2]
    train(train_options(shapes192, resumed, val_split=""))
    rows = train(train_options(shapes192, resumed, epochs=2, val_split="", resume="auto")).rows
    assert [row["epoch"] for row in rows] == [2]
    prefix = "ssd_mobilenetv2"
    assert_same_params(params_of(str(straight / prefix), 2), params_of(str(resumed / prefix), 2))
    states = [artifact.load_optimizer_state(str(run / prefix), 2) for run in (straight, resumed)]
    assert states[0] is not None and states[0].info == states[1].info
    assert sorted(states[0].arrays) == sorted(states[1].arrays)
    for key, array in states[0].arrays.items():
        assert np.array_equal(array.asnumpy(), states[1].arrays[key].asnumpy()), key
    log = (resumed / (prefix + "-log.csv")).read_text().splitlines()
    assert [row.split(",")[0] for row in log[1:]] == ["1", "2"]


def test_a_new_run_refuses_another_runs_folder_unless_told(shapes192, tmp_path):
    options = train_options(shapes192, tmp_path, val_split="", keep_last=1)
    train(options)
    with pytest.raises(OutputFolderInUse, match="--overwrite"):
        train(options)
    result = train(dataclasses.replace(options, overwrite=True, epochs=2))
    assert [row["epoch"] for row in result.rows] == [1, 2]
    # keep_last=1 and nothing validated: only the newest epoch stays.
    assert artifact.epochs(result.prefix) == [2]


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


def test_kill_during_save_keeps_previous_checkpoint(shapes192, tmp_path):
    flags = train_flags(shapes192, tmp_path, "--epochs", "2", "--val-split", "")
    killed = subprocess.run([sys.executable, "-c", KILL_DURING_SAVE] + flags,
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert killed.returncode == -9
    prefix = str(tmp_path / "ssd_mobilenetv2")
    assert artifact.latest_epoch(prefix) == 1
    assert any(name.startswith("ssd_mobilenetv2-0002.params.tmp") for name in os.listdir(tmp_path))
    rows = train(train_options(shapes192, tmp_path, epochs=2, val_split="", resume="auto")).rows
    assert [row["epoch"] for row in rows] == [2] and artifact.latest_epoch(prefix) == 2


def test_exploding_loss_stops_with_a_clear_message(shapes192, tmp_path, capsys):
    options = train_options(shapes192, tmp_path, epochs=2, val_split="", lr=1e6, momentum=0.0)
    with pytest.raises(TrainingDiverged, match="--lr"):
        train(options)
    flags = train_flags(shapes192, tmp_path / "cli", "--epochs", "2", "--val-split", "",
                        "--lr", "1e6", "--momentum", "0")
    assert zoo_main(["train"] + flags) == 1
    err = capsys.readouterr().err
    assert err.startswith("zoo train: error: loss") and "--lr" in err
    assert "\n" not in err.strip()


@pytest.fixture(scope="module")
def trained(shapes192, tmp_path_factory):
    """The artifact prefix of a 2-epoch run validated every epoch."""
    output = tmp_path_factory.mktemp("trained")
    return train(train_options(shapes192, output, epochs=2)).prefix


def test_evaluation_scores_every_image_of_the_best_epoch(shapes192, trained, tmp_path):
    output = tmp_path / "eval.json"
    result = evaluate(EvalOptions(checkpoint=trained, data_root=shapes192, output=str(output),
                                  progress=False))
    assert result.images == 4 and result.epoch == artifact.best_epoch(trained)
    assert result.output == str(output) and result.precision == {"dtype": "fp32"}
    saved = json.loads(output.read_text())
    assert saved["images"] == 4 and saved["epoch"] == result.epoch
    assert set(saved["voc"]) == {"voc07", "voc_area"} == set(result.voc)
    assert 0 <= saved["voc"]["voc07"]["mAP"] <= 1
    assert (tmp_path / "eval-detections.json").exists()
    table = format_table(result.class_names, result.voc).splitlines()
    assert table[0].split() == ["class", "voc07", "voc_area"] and table[-1].startswith("mAP")
    assert len(table) == len(embedded.CLASSES) + 2
    epoch_one = evaluate(EvalOptions(checkpoint=trained, data_root=shapes192, epoch=1,
                                     output=str(tmp_path / "one.json"), progress=False))
    assert epoch_one.epoch == 1


def test_evaluation_refuses_a_dataset_of_other_classes(shapes192, trained, tmp_path):
    other = embedded.generate(str(tmp_path / "other"), seed=2, num_train=4, num_val=4,
                              image_size=96)
    names = os.path.join(other, "classes.txt")
    assert os.path.exists(names), "the embedded dataset has no classes.txt to change"
    with open(names, "w") as stream:
        stream.write("\n".join(reversed(embedded.CLASSES)) + "\n")
    with pytest.raises(zoo.DataError, match="classes"):
        evaluate(EvalOptions(checkpoint=trained, data_root=other, progress=False))


def test_demo_draws_the_detections_it_returns(shapes192, trained, tmp_path):
    picture = tmp_path / "sub" / "demo.png"
    image = os.path.join(shapes192, "JPEGImages", "000008.jpg")
    detections = demo(DemoOptions(checkpoint=trained, image=image, output=str(picture),
                                  threshold=0.0))
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(detections) > 0 and detections.boxes.shape == (len(detections), 4)
    assert set(detections.names) <= set(embedded.CLASSES)
    high = demo(DemoOptions(checkpoint=trained, image=image, output=str(picture),
                            threshold=0.99))
    assert len(high) < len(detections) and (high.scores >= 0.99).all()


def test_quantize_writes_an_int8_artifact(shapes192, trained, tmp_path):
    output = str(tmp_path / "int8")
    result = quantize(QuantizeOptions(checkpoint=trained, data_root=shapes192, batch_size=4,
                                      calib_batches=1, output=output, exclude=("conv1",)))
    calibration = result.precision["calibration"]
    assert result.prefix == output and result.precision["dtype"] == "int8"
    assert calibration["mode"] == "naive" and calibration["images"] == 4
    assert calibration["excluded"] == ["conv1"] and calibration["int8_layers"] > 0
    loaded = artifact.load(output)
    assert loaded.is_int8 and loaded.precision == result.precision
    with pytest.raises(artifact.ArtifactError, match="is an int8 artifact, which runs on "
                       "MXNet's MKL-DNN only: quantize the fp32 artifact it was made from"):
        quantize(QuantizeOptions(checkpoint=output, data_root=shapes192, batch_size=4))
    with pytest.raises(zoo.DataError, match="calibration batch"):
        quantize(QuantizeOptions(checkpoint=trained, data_root=shapes192, split="val",
                                 batch_size=8, output=str(tmp_path / "none")))


def test_export_resaves_an_artifact_or_a_registered_model(trained, tmp_path):
    plain = export(ExportOptions(output=str(tmp_path / "plain"), checkpoint=trained,
                                 fused=False))
    loaded, source = artifact.load(plain.prefix), artifact.load(trained)
    assert plain.epoch == source.epoch and os.path.exists(plain.path)
    assert loaded.symbol.tojson() == source.model.symbol().tojson()
    assert_same_params((loaded.arg_params, loaded.aux_params),
                       (source.arg_params, source.aux_params))
    fresh = export(ExportOptions(output=str(tmp_path / "fresh"), network="ssd_mobilenetv2",
                                 data_shape=192))
    assert fresh.epoch == 0 and artifact.load(fresh.prefix).model.config["data_shape"] == 192
    with pytest.raises(zoo.errors.OptionsError):
        export(ExportOptions(output=str(tmp_path / "x")))


def test_export_to_onnx_detects_as_the_artifact_does(trained, shapes192, tmp_path, capsys):
    images = sorted(glob.glob(os.path.join(shapes192, "JPEGImages", "*.jpg")))
    result = export(ExportOptions(output=str(tmp_path / "onnx" / "ssd"), checkpoint=trained,
                                  format="onnx", verify=tuple(images)))
    assert result.path == str(tmp_path / "onnx" / "ssd.onnx") and os.path.isfile(result.path)
    assert result.parity.equal and result.parity.images == len(images) >= 12
    assert result.parity.detections >= 12 * 50
    found = load_onnx_detector(result.path)
    assert found.class_names == artifact.load(trained).class_names
    assert zoo_main(["export", "--checkpoint", trained, "--format", "onnx", "--output",
                     str(tmp_path / "cli"), "--verify", *images[:2]]) == 0
    out = capsys.readouterr().out
    assert "cli.onnx" in out and "ONNX Runtime against MXNet: equal over 2 images" in out
    with pytest.raises(zoo.errors.OptionsError, match="format onnx"):
        export(ExportOptions(output=str(tmp_path / "x"), checkpoint=trained, verify=("a",)))


def top10_agreement(expected, found):
    """The fraction of ``expected``'s boxes (Detections lists) that ``found`` has too: same
    class, IoU >= 0.9."""
    agreed = total = 0
    for theirs, ours in zip(expected, found):
        for box, label in zip(theirs.boxes, theirs.labels):
            low = np.maximum(box[:2], ours.boxes[:, :2])
            high = np.minimum(box[2:], ours.boxes[:, 2:])
            inter = np.prod(np.clip(high - low, 0, None), axis=1)
            areas = np.prod(ours.boxes[:, 2:] - ours.boxes[:, :2], axis=1)
            iou = inter / (np.prod(box[2:] - box[:2]) + areas - inter)
            agreed += bool(((iou >= 0.9) & (ours.labels == label)).any())
            total += 1
    return agreed / total


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_openvino_int8_detects_what_fp32_detects(trained, shapes, tmp_path, capsys):
    """Calibrated on the training split through ``zoo export``; compared on the held-out
    images, which calibration never saw."""
    int8, fp32 = str(tmp_path / "int8"), str(tmp_path / "fp32")
    assert zoo_main(["export", "--checkpoint", trained, "--format", "openvino", "--int8",
                     "--data-root", shapes, "--split", "train", "--calib-images", "8",
                     "--no-progress", "--output", int8]) == 0
    assert "int8: 67 layers, calibrated on 8 images of voc:%s/train" % shapes in (
        capsys.readouterr().out)
    assert zoo_main(["export", "--checkpoint", trained, "--format", "openvino",
                     "--output", fp32]) == 0
    held_out = open_dataset("voc", shapes, "val")
    images = [held_out.image_path(i) for i in range(len(held_out))]
    expected = zoo.load_openvino_detector(fp32 + ".xml")(images, score_threshold=0.0,
                                                         max_detections=10)
    found = zoo.load_openvino_detector(int8 + ".xml")(images, score_threshold=0.0,
                                                      max_detections=10)
    assert sum(map(len, expected)) == 10 * len(images) == 40
    assert top10_agreement(expected, found) >= 0.9
    scored = evaluate(EvalOptions(checkpoint=int8 + ".xml", data_root=shapes, progress=False))
    assert scored.images == 4 and scored.epoch is None
    assert scored.precision["calibration"]["images"] == 8
    assert scored.output == int8 + "-eval-val.json" and os.path.isfile(scored.output)


SMALL_SHAPES = {"ssd_resnet50": 300, "ssd_resnet101": 300, "ssd_inceptionv3": 300,
                "ssd_mobilenetv2": 192,
                # GluonCV's anchors are written out for its one input size
                "ssd_resnet50_v1_gluoncv_voc": 512, "ssd_resnet50_v1_gluoncv_coco": 512,
                "ssd_mobilenet1.0_gluoncv_voc": 512, "ssd_mobilenet1.0_gluoncv_coco": 512,
                "ssd_mobilenet0.25_gluoncv_voc": 300, "ssd_mobilenet0.25_gluoncv_coco": 300,
                "ssd_mobilenetv2_stride8_gluoncv": 192}
GENTLE = {name: {"lr": 1e-4} for name in SMALL_SHAPES if "_gluoncv" in name}
"""GluonCV's SSD decodes boxes unclipped: after a first step at the default rate its
untrained boxes reach infinity, which evaluation refuses."""


FEWER_ROIS = {"rpn_post_nms_top_n_train": 200, "rpn_post_nms_top_n_test": 50,
              "rcnn_batch_rois": 16}
"""Faster R-CNN's proposal and ROI counts at the tiny images' scale: the same graph, with
its ROI head (ResNet's whole stage 5 in C4) run on 16 ROIs an image instead of 128 in
training and 50 instead of 300 in evaluation (a quarter of the time and memory)."""


def at_test_scale(network, folder):
    """``network``, or for a Faster R-CNN a YAML config of it (``base: network``, the same
    model name) with :data:`FEWER_ROIS`, written in ``folder``: the user's own route."""
    if "max_size" not in zoo.get_config(network):
        return network
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, network + ".yaml")
    with open(path, "w") as config:
        config.write("base: %s\n" % network + "".join(
            "%s: %d\n" % item for item in FEWER_ROIS.items()))
    return path


@pytest.mark.parametrize("network", END_TO_END_RUNS)
def test_every_model_trains_and_evaluates(network, shapes192, tmp_path):
    config = at_test_scale(network, str(tmp_path / "config"))
    options = train_options(shapes192, tmp_path, network=config, val_split="", batch_size=2,
                            train_split="val", data_shape=SMALL_SHAPES.get(network, 160),
                            **GENTLE.get(network, {}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prefix = train(options).prefix
    # The zoo's own initialisation is a healthy start for every model: no initial-loss
    # warning (ResNet SSDs start at 3-7x the trivial loss, above the 3x of MobileNet's).
    assert not [str(w.message) for w in caught if issubclass(w.category, HealthWarning)
                and str(w.message).startswith("initial loss")]
    assert prefix == str(tmp_path / network) and artifact.latest_epoch(prefix) == 1
    result = evaluate(EvalOptions(checkpoint=prefix, data_root=shapes192, batch_size=2,
                                  progress=False))
    assert result.images == 4


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_benchmark_names_what_the_fastest_deployment_gives_up_on_a_dataset(
        trained, shapes192, monkeypatch, tmp_path):
    from zoo_bench import inference as benchmark_job
    from zoo_bench.inference import BenchmarkOptions, benchmark
    monkeypatch.setattr(benchmark_job, "gluoncv_names", lambda network: ())
    monkeypatch.setattr(benchmark_job, "matmul_peak_gflops", lambda: 100.0)  # seconds each
    monkeypatch.setattr(benchmark_job, "int8_matmul_peak_gops", lambda: 400.0)
    monkeypatch.setattr(benchmark_job, "bf16_matmul_peak_gflops", lambda: 200.0)
    calibrated_on = []
    calibration_batches = benchmark_job.calibration_batches
    monkeypatch.setattr(benchmark_job, "calibration_batches", lambda path, split, count: (
        calibrated_on.append((str(split), count)) or calibration_batches(path, split, count)))
    lines = []
    result = benchmark(BenchmarkOptions(checkpoint=trained, compare="all", runs=1, warmup=0,
                                        data_root=shapes192, calib_images=8), log=lines.append)
    assert calibrated_on == [("voc:%s/train" % shapes192, 8)]  # not the scored split
    scores = {s.side: s for s in result.scores}
    # MXNet bf16 where the CPU has it natively: the artifact zoo quantize --dtype bf16 writes
    bf16 = [] if bf16_unavailable() else ["ours bf16"]
    assert list(scores) == ["ours fp32"] + bf16 + ["onnxruntime fp32", "openvino fp32",
                                                   "openvino int8"]
    assert {s.metric for s in result.scores} == {"VOC07 mAP"}
    expected = evaluate(EvalOptions(checkpoint=trained, data_root=shapes192, progress=False,
                                    output=str(tmp_path / "eval.json"))).voc["voc07"]["mAP"]
    assert scores["ours fp32"].value == pytest.approx(expected)
    assert scores["onnxruntime fp32"].value == pytest.approx(expected, abs=0.02)  # one graph
    for side in bf16:  # bf16's rounding moves scores by about 0.01
        assert scores[side].value == pytest.approx(expected, abs=0.02)
    (fastest,) = result.fastest
    side = fastest.subject.split(":")[0]
    assert lines[-1] == ("accuracy cost of the fastest at batch 1, %s: VOC07 mAP %.4f against "
                         "%.4f for ours fp32 (%+.1f points)" % (
                             side, scores[side].value, expected,
                             100 * (scores[side].value - expected)))
    with pytest.raises(zoo.errors.OptionsError, match="--checkpoint and --compare all$"):
        BenchmarkOptions(checkpoint=trained, data_root=shapes192)
