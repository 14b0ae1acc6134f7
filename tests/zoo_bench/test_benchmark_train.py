"""The training benchmark (zoo_bench.train) on tiny cases: our Trainer and GluonCV's
recipe both train, rounds alternate, parts are timed and the printed figures are the
measured ones; ``zoo benchmark-train`` runs and refuses what it cannot compare."""
import re

import pytest

import zoo
import zoo.cli
from zoo_bench.flops import flops_by_layer
from zoo_bench.train_kernels import BF16, FP32
from zoo.engine.precision import bf16_layers, bf16_training_symbol, bf16_unavailable
from zoo.errors import OptionsError
from zoo_bench import train as job
from zoo_bench.train import PARTS, TARGETS, TrainBenchmarkOptions, benchmark_train

TIMED_PARTS = ("data", "forward", "backward", "update", "metrics")
NO_BF16 = bf16_unavailable()


def tiny(tmp_path, **options):
    return TrainBenchmarkOptions(**{
        "network": "ssd_mobilenetv2", "data_shape": 192, "batch_size": 2, "steps": 1,
        "rounds": 2, "warmup_rounds": 1, "data_threads": 1, "image_size": 96,
        "num_images": 3, "data_root": str(tmp_path / "shapes"), **options})


def test_ours_and_gluoncv_recipe_train_round_for_round(tmp_path, monkeypatch):
    # A small stand-in pair (not the same network: the report must say so).
    monkeypatch.setitem(job.GLUONCV_RECIPES, "ssd_mobilenetv2", "ssd_512_mobilenet1.0_voc")
    lines = []
    result = benchmark_train(tiny(tmp_path, dtypes=("fp32",), peak_probes=0),
                             log=lines.append)
    for side in (result.ours, result.gluoncv):
        # the warm-up round is left out; each kept round is one epoch of a step of 2 images
        assert [(r.samples, r.steps) for r in side.rounds] == [(2, 1), (2, 1)]
        assert all(r.seconds > 0 and r.cpu_seconds > 0 for r in side.rounds)
        assert all(side.part_seconds(part) > 0 for part in TIMED_PARTS), side.rounds
        # the parts happen inside the rounds' clocks
        assert sum(side.part_seconds(part) for part in PARTS) <= side.total("seconds")
        assert side.part_seconds(TARGETS) == 0  # MultiBoxTarget: in the graph's forward
        assert side.trainable_params > 100000
    assert result.ours.trainable_params != result.gluoncv.trainable_params
    text = "\n".join(lines)
    assert "MXNET_ENGINE_TYPE=NaiveEngine" in lines[0]
    assert "note: the sides train %d and %d parameters (%+d)" % (
        result.ours.trainable_params, result.gluoncv.trainable_params,
        result.ours.trainable_params - result.gluoncv.trainable_params) in text
    printed = float(re.search(r"ours / gluoncv: ([\d.]+)x samples/s", text).group(1))
    expected = result.ours.samples_per_s / result.gluoncv.samples_per_s
    assert printed == pytest.approx(expected, abs=0.006)
    forward = re.search(r"^forward +([\d.]+) +([\d.]+)$", text, re.M)
    assert float(forward.group(1)) == pytest.approx(result.ours.ms_per_step("forward"), abs=0.06)
    assert float(forward.group(2)) == pytest.approx(result.gluoncv.ms_per_step("forward"),
                                                    abs=0.06)


def test_command_times_ours_alone(tmp_path, capsys):
    assert zoo.cli.main(["benchmark-train", "--network", "ssd_mobilenetv2", "--data-shape",
                         "192", "--batch-size", "1", "--steps", "1", "--rounds", "1",
                         "--warmup-rounds", "0", "--data-threads", "1", "--image-size", "64",
                         "--num-images", "2", "--data-root", str(tmp_path / "shapes"),
                         "--compare", "none", "--dtypes", "fp32", "--peak-probes", "0"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ours: zoo Trainer, ssd_mobilenetv2, fp32 +[\d.]+ samples/s", out, re.M)
    assert "gluoncv" not in out and re.search(r"^step +[\d.]+$", out, re.M)


def test_command_refuses_a_network_without_a_gluoncv_recipe(capsys):
    assert zoo.cli.main(["benchmark-train", "--network", "ssd_mobilenetv2"]) == 1
    assert capsys.readouterr().err == (
        "zoo benchmark-train: error: no GluonCV recipe for ssd_mobilenetv2; --compare gluoncv "
        "knows %s\n" % ", ".join(job.GLUONCV_RECIPES))


@pytest.mark.skipif(NO_BF16 is not None, reason="no native bf16: %s" % NO_BF16)
def test_bf16_runs_beside_fp32_and_each_step_is_split_by_precision(tmp_path):
    lines = []
    result = benchmark_train(tiny(tmp_path, network="ssd_mobilenetv2_stride8", data_shape=128,
                                  batch_size=1, rounds=1, warmup_rounds=0, compare=None,
                                  peak_probes=1, peak_seconds=0.05), log=lines.append)
    text = "\n".join(lines)
    fp32, bf16 = result.ours_by_dtype["fp32"], result.ours_by_dtype["bf16"]
    assert result.ours is fp32 and "ours in fp32, then bf16 (auto: this CPU has" in lines[1]
    assert bf16.label.endswith(", bf16") and len(bf16.rounds) == 1
    printed = float(re.search(r"^ours bf16 / ours fp32: ([\d.]+)x samples/s", text, re.M)
                    .group(1))
    assert printed == pytest.approx(bf16.samples_per_s / fp32.samples_per_s, abs=0.006)
    for side in (fp32, bf16):
        kernels = side.kernels
        graph = sum(kernels.ms_per_step.values())
        # the operators of the monitored round add up to its forward and backward
        assert 0.5 * graph < kernels.parts_ms_per_step["forward"] + kernels.parts_ms_per_step[
            "backward"] < 1.5 * graph
        assert graph + kernels.parts_ms_per_step["update"] < kernels.step_ms
        assert kernels.ms_per_step["losses"] > 0 and kernels.ms_per_step["targets"] > 0
    assert fp32.kernels.ms_per_step[BF16] == 0 == fp32.kernels.ms_per_step["casts"]
    assert bf16.kernels.ms_per_step[BF16] > 0 and bf16.kernels.ms_per_step["casts"] > 0
    # the bf16 side's weighted layers are those the converted graph runs in bf16
    model = zoo.get_model("ssd_mobilenetv2_stride8", data_shape=128)
    shapes = model.train_input_shapes(1, 1)
    converted = bf16_layers(bf16_training_symbol(model.train_symbol(), shapes), shapes)
    weighted = set(flops_by_layer(model.train_symbol(), **shapes))
    assert bf16.kernels.layers[BF16] == len(weighted & set(converted))
    assert bf16.kernels.layers[BF16] + bf16.kernels.layers[FP32] == len(weighted)
    peaks = re.search(r"^matmul peaks on this machine \(best of 1 probes each\): bf16 "
                      r"([\d.]+) GFLOP/s, fp32 ([\d.]+) GFLOP/s$", text, re.M)
    rate = re.search(r"^ours bf16: %d bf16 layers, [\d.]+ GFLOPs a step \(3x the forward's "
                     r"multiply-adds\) in [\d.]+ ms: ([\d.]+) GFLOP/s, ([\d.]+)%% of the bf16 "
                     r"peak$" % bf16.kernels.layers[BF16], text, re.M)
    # each printed figure is rounded to 0.1, so the percentage lies between the bounds that the
    # rounded rate and peak allow (a 3.1 GFLOP/s rate may have been 3.05, 1.6% less)
    shown, rate_shown, peak_shown = (float(rate.group(2)), float(rate.group(1)),
                                     float(peaks.group(1)))
    low = 100 * (rate_shown - 0.05) / (peak_shown + 0.05) - 0.05
    high = 100 * (rate_shown + 0.05) / (peak_shown - 0.05) + 0.05
    assert low <= shown <= high
    assert re.search(r"^bf16 layers +0\.0 \( 0\.0%\) +[\d.]+ \( *[\d.]+%\)$", text, re.M)


def test_options_are_checked():
    with pytest.raises(OptionsError, match="steps must be >= 1, got 0"):
        TrainBenchmarkOptions(steps=0)
    with pytest.raises(OptionsError, match="warmup_rounds must be >= 0, got -1"):
        TrainBenchmarkOptions(warmup_rounds=-1)
    with pytest.raises(OptionsError, match="peak_seconds must be > 0, got 0"):
        TrainBenchmarkOptions(peak_seconds=0)
    with pytest.raises(OptionsError, match="unknown network 'nope'"):
        TrainBenchmarkOptions(network="nope")
    with pytest.raises(OptionsError, match=r"freeze '\[' is not a regular expression"):
        TrainBenchmarkOptions(freeze="[")
    with pytest.raises(OptionsError, match=r"--dtypes 'fp16': one of fp32, bf16, auto"):
        TrainBenchmarkOptions(dtypes=("fp32", "fp16"))


def test_command_refuses_a_broken_freeze_pattern(capsys):
    assert zoo.cli.main(["benchmark-train", "--freeze", "["]) == 1
    assert capsys.readouterr().err.startswith(
        "zoo benchmark-train: error: freeze '[' is not a regular expression: ")


@pytest.mark.slow
def test_fpn_against_gluoncv_faster_rcnn_recipe(tmp_path):
    """GluonCV's train_faster_rcnn.py loop runs beside ours; the --freeze pattern the README
    gives fixes of ours what GluonCV's recipe fixes (the two count within 0.1%: their RPN
    scores one logit per anchor, ours two, and their box predictor has no background row)."""
    lines = []
    result = benchmark_train(tiny(
        tmp_path, network="faster_rcnn_fpn_resnet50_gluoncv_coco", data_shape=160,
        max_size=160, batch_size=1, rounds=1, warmup_rounds=0,
        freeze=r"^(conv1_|stage1_)|_bn_(gamma|beta)$", peak_probes=0), log=lines.append)
    ours = list(result.ours_by_dtype.values())  # fp32, and bf16 where the CPU has it
    # GluonCV's recipe ran a round beside each of ours
    assert [(r.samples, r.steps) for r in result.gluoncv.rounds] == [(1, 1)] * len(ours)
    for side in ours + [result.gluoncv]:
        assert [(r.samples, r.steps) for r in side.rounds[:1]] == [(1, 1)]
        assert all(side.part_seconds(part) > 0 for part in TIMED_PARTS), side.rounds
    for side in ours:
        # our Python target operators ran inside forward, and were timed there
        assert 0 < side.part_seconds(TARGETS) < side.part_seconds("forward")
        assert side.kernels.ms_per_step["targets"] > 0
    assert result.gluoncv.part_seconds(TARGETS) == 0
    trained, theirs = result.ours.trainable_params, result.gluoncv.trainable_params
    assert abs(trained - theirs) < 1e-3 * theirs
    names = ["ours"] if len(ours) == 1 else ["ours fp32", "ours bf16"]
    for name in names:
        assert any(line.startswith("%s / gluoncv: " % name) for line in lines)
