"""bf16 inference artifacts (``zoo quantize --dtype bf16``): the converted graph detects what
its fp32 source does on image files, every reader of artifacts runs it, what needs fp32
(export, quantizing, fine-tuning, resuming) refuses it naming the fp32 artifact, and a CPU
without native bfloat16 (mocked) refuses to make or to run one, in one line each."""
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
from mxnet.contrib.amp.amp import bfloat16

import zoo
from zoo import artifact
from zoo.cli import main
from zoo.onnx import parity
from zoo.predictor import bf16_unavailable

from factories import (DETECT_CLASSES, one_error_line, smooth_image, spread_ssd_artifact,
                       unit_variance_params)

from factories import ROOT
NO_BF16 = bf16_unavailable()
needs_bf16 = pytest.mark.skipif(NO_BF16 is not None, reason="no native bf16: %s" % NO_BF16)

PHOTOS = {"wide.jpg": (97, 143), "tall.png": (131, 77), "square.jpg": (128, 128)}
"""Image files: (height, width)."""
TOP = 100
"""Detections compared per image, best first: their scores span 0.47 to 0.62."""
SCORE_TOLERANCE = 0.01
BOX_TOLERANCE = 0.002
"""bf16 against fp32: a bfloat16 has 8 significant bits (relative rounding 2**-9), the
weights and each layer's output are rounded; measured on these images: scores within
0.004, box corners within 0.0002 of the image side."""
WITHOUT_BF16 = frozenset({"fpu", "avx512f", "avx2"})


def quantize_command(*argv):
    """``python -m zoo quantize ARGV`` from this checkout, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "zoo", "quantize", *map(str, argv)],
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))


@pytest.fixture(scope="module")
def prefixes(tmp_path_factory):
    """``(fp32, bf16)``: a small SSD artifact whose scores spread with the image (random
    unit-variance parameters), and its bf16 conversion by ``python -m zoo quantize --dtype
    bf16`` at the default output."""
    model = zoo.get_model("ssd_mobilenetv2_stride8", data_shape=128,
                          num_classes=len(DETECT_CLASSES), class_names=DETECT_CLASSES)
    model.arg_params, model.aux_params = unit_variance_params(model, seed=3)
    fp32 = str(tmp_path_factory.mktemp("bf16") / "ssd")
    artifact.export(model, fp32)
    done = quantize_command("--checkpoint", fp32, "--dtype", "bf16")
    assert done.returncode == 0, done.stderr[-2000:]
    bf16 = fp32 + "-bf16"
    layers = artifact.load(bf16).precision["bf16_layers"]
    assert done.stdout == "%d layers in bf16 (convert, fuse); artifact written to %s\n" % (
        layers, bf16)
    return fp32, bf16


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    for seed, (name, (height, width)) in enumerate(sorted(PHOTOS.items())):
        assert cv2.imwrite(str(folder / name), smooth_image(height, width, seed))
    return [str(folder / name) for name in sorted(PHOTOS)]


@needs_bf16
def test_the_artifact_holds_the_bf16_graph_and_weights(prefixes):
    fp32, bf16 = prefixes
    source, converted = artifact.load(fp32), artifact.load(bf16)
    assert converted.precision["dtype"] == "bf16" and converted.epoch == source.epoch == 0
    assert converted.precision["source"] == "%s-0000" % fp32
    assert converted.precision["order"] == "convert, fuse"
    assert converted.precision["bf16_layers"] > 10
    # its own graph, as an int8 epoch's: fused, with bfloat16 casts
    assert converted.meta["graph"] == os.path.basename(artifact.epoch_files(bf16, 0).graph)
    graph = converted.symbol.tojson()
    assert "_sg_mkldnn_conv" in graph and "bfloat16" in graph
    # the layers' weights stored (and read back) in bfloat16, same names and shapes
    dtypes = {np.dtype(v.dtype) for v in converted.arg_params.values()}
    assert dtypes == {bfloat16, np.dtype(np.float32)}, dtypes
    assert {k: v.shape for k, v in converted.arg_params.items()} == \
        {k: v.shape for k, v in source.arg_params.items()}
    assert converted.class_names == source.class_names
    assert converted.preprocessing == source.preprocessing


@needs_bf16
def test_bf16_detects_what_fp32_does_on_image_files(prefixes, photos):
    """The accuracy check: each image's best detections have the same classes, scores and
    boxes within bf16's rounding; the graphs do differ (bf16 did run), and the comparison
    tells images apart."""
    detectors = [zoo.open_detector(prefix) for prefix in prefixes]
    assert detectors[1].precision["dtype"] == "bf16"
    found = [detector(photos, score_threshold=0.0, max_detections=TOP + parity.TIE_MARGIN)
             for detector in detectors]
    sizes = [cv2.imread(path).shape[1::-1] for path in photos]
    result = parity.compare(*found, sizes, score_tolerance=SCORE_TOLERANCE,
                            box_tolerance=BOX_TOLERANCE, top=TOP)
    assert result.equal, (str(result), result.mismatches)
    assert result.detections == TOP * len(photos)
    assert 0 < result.max_score_difference, str(result)
    # not a comparison of near-ties: fp32's best scores spread well beyond the tolerance,
    # and each image's detections match no other image's
    assert all(f.scores[0] - f.scores[TOP - 1] > 10 * SCORE_TOLERANCE for f in found[0])
    others = parity.compare(found[0], found[1][1:] + found[1][:1], sizes,
                            score_tolerance=SCORE_TOLERANCE, box_tolerance=BOX_TOLERANCE,
                            top=TOP)
    assert len(others.mismatches) == len(photos), str(others)


@needs_bf16
def test_eval_detect_demo_and_benchmark_run_it(prefixes, photos, shapes, tmp_path, capsys):
    fp32, bf16 = prefixes
    scores = {}
    for prefix in prefixes:
        output = str(tmp_path / (os.path.basename(prefix) + ".json"))
        assert main(["eval", "--checkpoint", prefix, "--data-root", shapes, "--split", "val",
                     "--no-progress", "--output", output]) == 0
        summary = capsys.readouterr().out.splitlines()[0]
        assert summary.endswith(", bf16") == (prefix == bf16), summary
        with open(output) as stream:
            scored = json.load(stream)
        assert scored["precision"]["dtype"] == ("bf16" if prefix == bf16 else "fp32")
        scores[prefix] = scored["voc"]["voc07"]["mAP"]
    assert abs(scores[bf16] - scores[fp32]) <= 0.05, scores
    output = str(tmp_path / "detected")
    assert main(["detect", *photos, "--checkpoint", bf16, "--output", output, "--no-pictures",
                 "--no-progress", "--threshold", "0.3"]) == 0
    with open(os.path.join(output, "results.json")) as stream:
        entries = json.load(stream)["images"]
    assert len(entries) == len(photos) and all(entry["detections"] for entry in entries)
    assert main(["demo", "--checkpoint", bf16, "--image", photos[0],
                 "--output", str(tmp_path / "demo.png")]) == 0
    assert os.path.getsize(tmp_path / "demo.png") > 0
    capsys.readouterr()
    assert main(["benchmark", "--checkpoint", bf16, "--runs", "1", "--warmup", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "bf16 matmul peak" in lines[0]
    assert lines[1].split()[:6] == ["ours", "bf16:", "ssd-bf16-0000", "128x128", "batch", "1"]


@needs_bf16
def test_what_needs_fp32_refuses_it_naming_the_fp32_artifact(prefixes, shapes, tmp_path,
                                                             capsys):
    fp32, bf16 = prefixes
    made_from = "the fp32 artifact it was made from (%s-0000)" % fp32
    refusal = "%s-0000 is a bf16 artifact, which runs on MXNet's MKL-DNN only: " % bf16
    data = ["--dataset", "voc", "--data-root", shapes]
    train = ["train", *data, "--network", "ssd_mobilenetv2_stride8", "--data-shape", "128",
             "--batch-size", "2", "--epochs", "2", "--no-progress", "--val-split", "",
             "--output-dir", str(tmp_path / "train")]
    for command, argv, action in [
            ("export", ["--checkpoint", bf16, "--format", "onnx",
                        "--output", str(tmp_path / "x")], "export"),
            ("export", ["--checkpoint", bf16, "--format", "openvino",
                        "--output", str(tmp_path / "x")], "export"),
            ("quantize", ["--checkpoint", bf16, *data], "quantize"),
            ("quantize", ["--checkpoint", bf16, "--dtype", "bf16",
                          "--output", str(tmp_path / "again")], "quantize"),
            ("train", train[1:] + ["--init-from", bf16], "fine-tune from"),
            ("train", train[1:] + ["--resume", bf16], "resume")]:
        assert main([command, *argv]) == 1
        line = one_error_line(capsys, command)
        prefix = "zoo %s: error: %s" % (command, "init_from " if "--init-from" in argv else "")
        assert line == prefix + refusal + action + " " + made_from
    assert not any(name.startswith(("x.", "again")) for name in os.listdir(tmp_path))
    # calibration flags mean nothing to a conversion: refused, not ignored
    assert main(["quantize", "--checkpoint", fp32, "--dtype", "bf16", "--data-root", shapes,
                 "--calib-batches", "2", "--output", str(tmp_path / "flags")]) == 1
    assert one_error_line(capsys, "quantize") == (
        "zoo quantize: error: --data-root and --calib-batches: only int8 calibrates on "
        "images; bf16 converts the graph without data: give no calibration flag with "
        "--dtype bf16")
    # another epoch of the same conversion may join the output; int8 epochs may not
    assert main(["quantize", "--checkpoint", fp32, "--dtype", "bf16", "--output", bf16]) == 1
    assert one_error_line(capsys, "quantize") == (
        "zoo quantize: error: %s: already holds bf16 epoch 0; remove it or choose another "
        "--output" % bf16)
    assert main(["quantize", "--checkpoint", fp32, *data, "--batch-size", "4",
                 "--output", bf16]) == 1
    assert one_error_line(capsys, "quantize") == (
        "zoo quantize: error: %s: holds epoch 0 of another artifact (%s-0000); quantization "
        "adds only to the int8 epochs of %s: choose another --output" % (bf16, fp32, fp32))


def test_a_cpu_without_bf16_refuses_to_make_or_run_one(tmp_path, monkeypatch, capsys):
    """Mocked: a CPU whose flags lack avx512_bf16 and amx_bf16. A bf16 artifact made where
    it runs (here: written as zoo quantize writes one) is refused where it would be
    emulated, naming the fp32 artifact to run instead."""
    from zoo.engine.precision import bf16_inference_graph
    fp32 = spread_ssd_artifact(str(tmp_path / "ssd"))
    source = artifact.load(fp32)
    symbol, args, aux = bf16_inference_graph(source.model.symbol(), source.arg_params,
                                             source.aux_params, source.model.input_shapes(1),
                                             fuse_first=False)
    bf16 = str(tmp_path / "converted")
    artifact.save(bf16, 0, source.model, args, aux, symbol=symbol,
                  precision={"dtype": "bf16", "source": "%s-0000" % fp32})
    monkeypatch.setattr(zoo.predictor, "cpu_flags", lambda: WITHOUT_BF16)
    capsys.readouterr()
    no_bf16 = ("this CPU has neither avx512_bf16 nor amx_bf16 among its /proc/cpuinfo flags: "
               "bfloat16 would be emulated, slower than fp32")
    assert main(["quantize", "--checkpoint", fp32, "--dtype", "bf16"]) == 1
    assert one_error_line(capsys, "quantize") == (
        "zoo quantize: error: --dtype bf16: %s; deploy the fp32 artifact, or quantize it "
        "with --dtype int8" % no_bf16)
    assert not os.path.exists(fp32 + "-bf16-0000.json")
    refusal = "%s-0000 is a bf16 artifact and %s: run the fp32 artifact it was made from " \
              "(%s-0000)" % (bf16, no_bf16, fp32)
    with pytest.raises(artifact.ArtifactError) as error:
        zoo.load_detector(bf16)
    assert str(error.value) == refusal
    image = str(tmp_path / "photo.png")
    assert cv2.imwrite(image, smooth_image(64, 80, 0))
    for command, argv in (("detect", [image, "--output", str(tmp_path / "out"),
                                      "--no-progress"]),
                          ("benchmark", [])):
        assert main([command, "--checkpoint", bf16, *argv]) == 1
        assert one_error_line(capsys, command) == "zoo %s: error: %s" % (command, refusal)
    assert not os.path.exists(tmp_path / "out")
    # the fp32 artifact runs there
    assert len(zoo.open_detector(fp32)(image, score_threshold=0.3)) > 0
