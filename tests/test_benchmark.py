"""FLOP counting, the inference benchmark (zoo.jobs.benchmark) on tiny cases, the memory
benchmark's options (its run: tests/test_memory_saving.py) and a smoke test of each command."""
import os
import subprocess
import sys

import mxnet as mx
import pytest

import zoo
import zoo.cli
from zoo import artifact
from zoo.errors import OptionsError
from zoo.flops import count_flops
from zoo.jobs.benchmark import BenchmarkOptions, benchmark, checkpoint_subject
from zoo.jobs.benchmark_memory import MemoryBenchmarkOptions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    measured = [(m.subject.split(":")[0], m.batch_size) for m in result.measurements]
    assert measured == [("ours fp32", 1), ("ours int8", 1), ("ours fp32", 2), ("ours int8", 2)]
    for m in result.measurements:
        assert "%s 192x192" % NETWORK in m.subject and m.images_per_s > 0
        assert m.peak_fraction == pytest.approx(m.gflops_per_image * m.images_per_s
                                                / result.peak_gflops)
    fp32, int8 = result.measurements[:2]
    assert fp32.gflops_per_image == int8.gflops_per_image > 0   # the work, not the precision
    # one report line per measurement, as it is measured, then the plot's
    assert [line.split(":")[0] for line in lines[1:5]] == [m for m, _ in measured]
    assert result.ratios == () and lines[5] == "plot written to %s" % result.plot
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


@pytest.mark.parametrize("options, message", [
    (dict(network=NETWORK, dtypes=("fp16",)), "dtypes must be a non-empty subset"),
    (dict(network=NETWORK, batch_sizes=(0,)), "at least 1"),
    (dict(checkpoint="x", dtypes=("int8",)), "a checkpoint runs as saved"),
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
                                       "data shape or dtypes with it\n")


@pytest.mark.parametrize("command, flags", [
    ("benchmark", ["--network", "--checkpoint", "--epoch", "--data-shape", "--dtypes",
                   "--batch-sizes", "--runs", "--warmup", "--compare", "--num-classes",
                   "--plot", "(default: fp32)", "(default: 5)"]),
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
