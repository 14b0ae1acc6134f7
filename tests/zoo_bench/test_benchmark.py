"""FLOP counting, the inference benchmark (zoo_bench.inference) on tiny cases, the memory
benchmark's options (its run: tests/zoo/engine/test_memory.py) and a smoke test of each command."""
import dataclasses
import os
import subprocess
import sys

import mxnet as mx
import pytest

import zoo
import zoo.cli
from zoo import artifact
from zoo.errors import OptionsError
from zoo_bench.flops import count_flops
from zoo_bench import inference as benchmark_job
from zoo_bench.inference import (BenchmarkOptions, Measurement, SpeedRatio, Subject, benchmark,
                                checkpoint_subject, int8_matmul_peak_gops, naive_int8,
                                ratio_table, speed_ratios)
from zoo_bench.memory import MemoryBenchmarkOptions
from zoo_bench.profile import (PARTS, Node, format_profile, graph_nodes, node_parts, part_gflops,
                             profile_graph)

from factories import ROOT
NETWORK = "ssd_mobilenetv2_stride8"


def test_flops_of_a_hand_computed_graph():
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, name="conv", num_filter=8, kernel=(3, 3), pad=(1, 1),
                              stride=(2, 2), num_group=2)
    pool = mx.sym.Pooling(conv, name="pool", kernel=(2, 2), stride=(2, 2), pool_type="max")
    fc = mx.sym.FullyConnected(pool, name="fc", num_hidden=10)
    conv_macs = (8 * 16 * 16) * (4 // 2 * 3 * 3)   # outputs x (in/groups * kernel)
    fc_macs = 10 * (8 * 8 * 8)
    assert count_flops(fc, data=(1, 4, 32, 32)) == 2 * (conv_macs + fc_macs)
    assert count_flops(fc, data=(3, 4, 32, 32)) == 3 * 2 * (conv_macs + fc_macs)


def test_benchmark_reports_fp32_and_int8_per_batch_size_and_plots(tmp_path):
    lines = []
    result = benchmark(BenchmarkOptions(network=NETWORK, data_shape=192, dtypes=("fp32", "int8"),
                                        batch_sizes=(1, 2), runs=1, warmup=0,
                                        plot=str(tmp_path / "speed.png")), log=lines.append)
    assert result.peak_gflops > 0 and "GFLOP/s" in lines[0]
    assert result.int8_peak_gops > 0 and "GOP/s" in lines[0]   # an int8 graph is timed
    measured = [(m.subject.split(":")[0], m.batch_size) for m in result.measurements]
    assert measured == [("ours fp32", 1), ("ours int8", 1), ("ours fp32", 2), ("ours int8", 2)]
    peaks = {"fp32": result.peak_gflops, "int8": result.int8_peak_gops}
    for m in result.measurements:
        assert "%s 192x192" % NETWORK in m.subject and m.images_per_s > 0
        # each row against the peak of its own precision
        assert m.subject.startswith("ours " + m.precision)
        assert m.peak_fraction == pytest.approx(m.gflops_per_image * m.images_per_s
                                                / peaks[m.precision])
    fp32, int8 = result.measurements[:2]
    assert fp32.gflops_per_image == int8.gflops_per_image > 0   # the work, not the precision
    # one report line per measurement, as it is measured, then the plot's
    assert [line.split(":")[0] for line in lines[1:5]] == [m for m, _ in measured]
    assert result.ratios == () and result.profiles == ()
    assert lines[5] == "plot written to %s" % result.plot
    assert os.path.getsize(result.plot) > 0


def test_checkpoint_runs_as_saved_from_its_artifact(tmp_path):
    model = zoo.get_model(NETWORK, data_shape=128, num_classes=3)
    arg_params, aux_params = model.init_params(seed=0)
    prefix = str(tmp_path / "tiny")
    artifact.save(prefix, 4, model, arg_params, aux_params)
    loaded, subject = checkpoint_subject(prefix)
    assert subject.label == "ours fp32: tiny-0004 128x128"
    assert loaded.config["num_classes"] == 3 and subject.params == model.num_params()
    subject.run(2)()   # one batch through the saved graph


def test_int8_peak_is_measured():
    assert int8_matmul_peak_gops(size=256, seconds=0.2) > 0


def _subject(label):
    side, name = label.split(": ")
    return Subject(side, name, run=None, gflops=1.0, params=1)


def _measurement(label, images_per_s):
    return Measurement(label, 1, 1 / images_per_s, images_per_s, 1.0, label.split()[1][:4],
                       0.1, 1)


def test_every_one_of_ours_is_compared_with_every_reference_in_a_table():
    ours = [_subject("ours fp32: m 600x1000"), _subject("ours int8: m 600x1000")]
    references = [_subject("gluoncv fp32: c4 600x1000"), _subject("gluoncv fp32: fpn 600x1000")]
    rates = {"ours fp32: m 600x1000": 2.0, "ours int8: m 600x1000": 8.0,
             "gluoncv fp32: c4 600x1000": 1.0, "gluoncv fp32: fpn 600x1000": 4.0}
    measured = {label: _measurement(label, rate) for label, rate in rates.items()}
    ratios = speed_ratios(ours, references, measured, 1)
    assert [(r.subject.split(":")[0], r.reference.split(": ")[1], r.ratio) for r in ratios] == [
        ("ours fp32", "c4 600x1000", 2.0), ("ours fp32", "fpn 600x1000", 0.5),
        ("ours int8", "c4 600x1000", 8.0), ("ours int8", "fpn 600x1000", 2.0)]
    table = ratio_table(ratios + [SpeedRatio(ours[0].label, references[0].label, 4, 3.0)])
    assert "reference 1: gluoncv fp32: c4 600x1000" in table[1]
    assert "reference 2: gluoncv fp32: fpn 600x1000" in table[2]
    rows = [line.split()[-3:] for line in table[4:]]
    assert rows == [["1", "2.00x", "0.50x"], ["1", "8.00x", "2.00x"], ["4", "3.00x", "-"]]


def test_benchmark_times_every_gluoncv_reference_on_our_input(monkeypatch):
    monkeypatch.setitem(benchmark_job.GLUONCV_MODELS, "ssd_mobilenetv2",
                        ("ssd_512_mobilenet1.0_voc", "ssd_512_resnet50_v1_voc"))
    lines = []
    result = benchmark(BenchmarkOptions(network="ssd_mobilenetv2", data_shape=256, runs=1,
                                        warmup=0, compare="gluoncv"), log=lines.append)
    labels = [m.subject for m in result.measurements]
    assert labels == ["ours fp32: ssd_mobilenetv2 256x256",
                      "gluoncv fp32: ssd_512_mobilenet1.0_voc 256x256",
                      "gluoncv fp32: ssd_512_resnet50_v1_voc 256x256"]
    assert [(r.subject, r.reference) for r in result.ratios] == [(labels[0], labels[1]),
                                                                (labels[0], labels[2])]
    assert all(m.gflops_per_image > 0 for m in result.measurements)
    assert "speed ratios" in lines[4] and lines[-1].split()[-2:] == [
        "%.2fx" % r.ratio for r in result.ratios]


def test_benchmark_times_our_fp32_graph_on_onnx_runtime_beside_ours():
    lines = []
    result = benchmark(BenchmarkOptions(network="ssd_mobilenetv2", data_shape=192, runs=1,
                                        warmup=0, dtypes=("fp32", "int8"),
                                        compare="onnxruntime"), log=lines.append)
    labels = [m.subject for m in result.measurements]
    assert labels == ["ours fp32: ssd_mobilenetv2 192x192", "ours int8: ssd_mobilenetv2 192x192",
                      "onnxruntime fp32: ssd_mobilenetv2 192x192"]
    assert [(r.subject, r.reference) for r in result.ratios] == [(labels[0], labels[2]),
                                                                (labels[1], labels[2])]
    assert result.measurements[2].gflops_per_image == result.measurements[0].gflops_per_image
    with pytest.raises(OptionsError, match="fp32"):
        benchmark(BenchmarkOptions(network="ssd_mobilenetv2", data_shape=192, runs=1,
                                   dtypes=("int8",), compare="onnxruntime"))


def test_operators_are_grouped_into_parts_by_name_and_inputs():
    """An FPN graph's names, int8 (quantize, fused and dequantize nodes) and a C4 head stage
    after ROIAlign, which an unnamed operator right after ROIAlign starts."""
    nodes = [Node("data_quantize", "data_quantize", ()),
             Node("quantized_sg_conv_0", "conv1", ("data_quantize",)),
             Node("quantized_sg_conv_1", "stage3_unit1_conv1", ("quantized_sg_conv_0",)),
             Node("sg_conv_1_dequantize", "sg_conv_1_dequantize", ("quantized_sg_conv_1",)),
             Node("sg_conv_2", "fpn_lateral_p4", ("sg_conv_1_dequantize",)),
             Node("fpn_upsample_p4", "fpn_upsample_p4", ("sg_conv_2",)),
             Node("sg_conv_3", "rpn_conv_p4", ("fpn_upsample_p4",)),
             Node("sg_conv_3_dequantize", "sg_conv_3_dequantize", ("sg_conv_3",)),
             Node("rpn_cls_score_p4", "rpn_cls_score_p4", ("sg_conv_3_dequantize",)),
             Node("rpn_bbox_pred_p4", "rpn_bbox_pred_p4", ("sg_conv_3_dequantize",)),
             Node("rpn_nms", "rpn_nms", ("rpn_cls_score_p4", "rpn_bbox_pred_p4")),
             Node("roi_on_p4", "roi_on_p4", ("rpn_nms",)),
             Node("roi_align_p4", "roi_align_p4", ("fpn_upsample_p4", "roi_on_p4")),
             Node("roi_pooled", "roi_pooled", ("roi_align_p4",)),
             Node("sg_conv_4", "stage4_unit1_conv1", ("roi_pooled",)),
             Node("sg_conv_5", "stage4_unit1_conv2", ("sg_conv_4",)),
             Node("sg_fc_6", "head_fc1", ("sg_conv_5",)),
             Node("sg_fc_7", "rcnn_cls_score", ("sg_fc_6",)),
             Node("rcnn_decode", "rcnn_decode", ("sg_fc_7", "rpn_nms")),
             Node("rcnn_nms", "rcnn_nms", ("rcnn_decode",)),
             Node("detection", "detection", ("rcnn_nms",))]
    parts = node_parts(nodes)
    expected = ["backbone"] * 4 + ["fpn"] * 2 + ["rpn head"] * 4 + ["proposals"] \
        + ["roi align"] * 3 + ["box head"] * 4 + ["nms+decode"] * 3
    assert [parts[node.name] for node in nodes] == expected
    assert set(parts.values()) == set(PARTS)


def _tiny_faster_rcnn(network="faster_rcnn_resnet50"):
    return zoo.get_model(network, data_shape=128, max_size=160, num_classes=3,
                         rpn_pre_nms_top_n_test=64, rpn_post_nms_top_n_test=8)


def test_faster_rcnn_input_is_data_shape_by_max_size():
    model, (subject,) = benchmark_job.network_subjects(BenchmarkOptions(
        network="faster_rcnn_resnet50", data_shape=128, max_size=192))
    assert model.input_shapes(1)["data"] == (1, 3, 128, 192)
    assert subject.label == "ours fp32: faster_rcnn_resnet50 128x192"


def test_graph_nodes_name_fused_layers_by_their_first_layer():
    model = _tiny_faster_rcnn()
    nodes = graph_nodes(zoo.predictor.fuse(model.symbol()))
    layers = [node.layer for node in nodes]
    assert layers[0] == "conv1" and "roi_align" in layers and layers[-1] == "detection"
    names = {node.name for node in nodes}
    assert all(set(node.inputs) <= names for node in nodes)


@pytest.mark.parametrize("network, parts", [
    ("faster_rcnn_resnet50", set(PARTS) - {"fpn"}),   # C4: no feature pyramid
    ("faster_rcnn_fpn_resnet50", set(PARTS)),
])
def test_profile_times_every_part_of_fp32_and_int8_graphs(network, parts):
    model = _tiny_faster_rcnn(network)
    arg_params, aux_params = model.init_params(seed=0)
    inputs = model.input_arrays(benchmark_job.random_images(model.input_shapes(1)["data"]))
    graphs = {"fp32": (model.symbol(), arg_params, aux_params),
              "int8": naive_int8(model, arg_params, aux_params)}
    gflops = part_gflops(model.symbol(), model.input_shapes(1))
    assert sum(gflops.values()) * 1e9 == pytest.approx(count_flops(model.symbol(),
                                                                   **model.input_shapes(1)))
    # work where there are convolutions and fully connected layers
    assert {part for part, work in gflops.items() if work > 0} == parts - {
        "proposals", "roi align", "nms+decode"}
    for dtype, graph in graphs.items():
        profile = profile_graph(dtype, *graph, inputs, gflops, runs=1)
        assert tuple(profile.ms_per_image) == PARTS and profile.gflops_per_image == gflops
        assert {part for part, ms in profile.ms_per_image.items() if ms > 0} == parts
        lines = format_profile(profile)
        assert len(lines) == len(PARTS) + 2 and lines[-1].split()[0] == "total"


@pytest.mark.parametrize("options, message", [
    (dict(network=NETWORK, dtypes=("fp16",)), "dtypes must be a non-empty subset"),
    (dict(network=NETWORK, batch_sizes=(0,)), "at least 1"),
    (dict(checkpoint="x", dtypes=("int8",)), "a checkpoint runs as saved"),
    (dict(checkpoint="x", max_size=1000), "a checkpoint runs as saved"),
    (dict(network=NETWORK, checkpoint="x"), "not both"),
    (dict(), "not neither"),
])
def test_benchmark_options_are_checked(options, message):
    with pytest.raises(OptionsError, match=message):
        BenchmarkOptions(**options)


def test_benchmark_command_refuses_bad_flags(capsys):
    for flags in (["--network", "ssd_resnet50", "--dtypes", "fp16"],
                  ["--network", "ssd_resnet50", "--batch-sizes", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            zoo.cli.main(["benchmark"] + flags)
        assert exit_info.value.code == 2 and "error:" in capsys.readouterr().err
    assert zoo.cli.main(["benchmark", "--checkpoint", "x", "--dtypes", "int8"]) == 1
    assert capsys.readouterr().err == ("zoo benchmark: error: a checkpoint runs as saved: no "
                                       "data shape, max size or dtypes with it\n")


@pytest.mark.parametrize("command, flags", [
    ("benchmark", ["--network", "--checkpoint", "--epoch", "--data-shape", "--max-size",
                   "--dtypes", "--batch-sizes", "--runs", "--warmup", "--compare",
                   "--num-classes", "--plot", "--profile", "(default: fp32)",
                   "(default: 5)"]),
    ("benchmark-memory", ["--network", "--data-shape", "--batch-size", "--steps", "--warmup",
                          "--configurations", "(default: plain,mxnet-mirror,memory-saving)"]),
])
def test_command_help_lists_the_flags(command, flags, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")   # no line breaks inside the defaults
    with pytest.raises(SystemExit) as exit_info:
        zoo.cli.main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in flags:
        assert flag in out, flag


def test_tool_sets_openmp_threads_before_mxnet_loads():
    """tools/benchmark.py, a shell around ``zoo benchmark``, reports all cores' threads."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "benchmark.py"), "--network", NETWORK,
         "--data-shape", "128", "--runs", "1", "--warmup", "0"],
        capture_output=True, text=True, env=dict(env, PYTHONPATH=ROOT), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    peak, row = result.stdout.splitlines()
    assert "OMP_NUM_THREADS=%d" % len(os.sched_getaffinity(0)) in peak
    assert row.startswith("ours fp32: %s 128x128" % NETWORK) and "batch  1" in row


def test_memory_benchmark_options_are_checked():
    with pytest.raises(OptionsError, match="must include plain"):
        MemoryBenchmarkOptions(network=NETWORK, configurations=("memory-saving",))
    with pytest.raises(OptionsError, match="unknown network"):
        MemoryBenchmarkOptions(network="nope")


def test_a_reference_mxnet_cannot_run_is_left_out_in_one_line(monkeypatch):
    """GluonCV's FPN quantized by quantize_net fails inside MXNet 1.9.1; the benchmark names
    it and still compares ours with the references that run."""
    def fails(batch_size):
        def run():
            raise mx.base.MXNetError("Traceback (most recent call last):\n  File \"x.h\", line 2\n"
                                     "MXNetError: Check failed: type_flag_: data type do not match")
        return run
    broken = Subject("gluoncv int8", "broken 128x128", fails, 1.0, 10)

    def references(options, model, ours, scratch):
        return [broken, dataclasses.replace(ours[0], side="gluoncv fp32")]
    monkeypatch.setattr(benchmark_job, "reference_subjects", references)
    monkeypatch.setattr(benchmark_job, "matmul_peak_gflops", lambda: 100.0)
    lines = []
    result = benchmark(BenchmarkOptions(network=NETWORK, data_shape=128, runs=1, warmup=0,
                                        batch_sizes=(1, 2), compare="gluoncv"), log=lines.append)
    assert lines.count("gluoncv int8: broken 128x128: cannot run at batch 1 (Check failed: "
                       "type_flag_: data type do not match); left out") == 1
    assert [m.subject.split(":")[0] for m in result.measurements] == [
        "ours fp32", "gluoncv fp32"] * 2
    assert [(r.reference.split(":")[0], r.batch_size) for r in result.ratios] == [
        ("gluoncv fp32", 1), ("gluoncv fp32", 2)]
