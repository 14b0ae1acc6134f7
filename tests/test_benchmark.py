"""FLOP counting and the benchmark tool on a tiny case."""
import os
import subprocess
import sys

import mxnet as mx

from zoo.flops import count_flops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def run_benchmark(*flags):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "benchmark.py")] + list(flags),
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))


def test_benchmark_tool_reports_fp32_and_int8_per_batch_size_and_plots(tmp_path):
    result = run_benchmark("--network", "ssd_mobilenetv2_stride8", "--data-shape", "192",
                           "--dtypes", "fp32,int8", "--batch-sizes", "1,2", "--runs", "1",
                           "--warmup", "0", "--plot", str(tmp_path / "speed.png"))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    peak = lines[0]
    assert "GFLOP/s" in peak and float(peak.split(":")[1].split()[0]) > 0
    assert "OMP_NUM_THREADS=%d" % len(os.sched_getaffinity(0)) in peak
    rows = [line for line in lines if line.startswith("ours ")]
    assert [row.split(":")[0] for row in rows] == ["ours fp32", "ours int8"] * 2
    for row, batch in zip(rows, (1, 1, 2, 2)):
        assert "ssd_mobilenetv2_stride8 192x192" in row and "batch  %d" % batch in row
        assert float(row.split("img/s")[0].split()[-1]) > 0
    fp32_gflops, int8_gflops = (float(row.split("GFLOPs/img")[0].split()[-1]) for row in rows[:2])
    assert fp32_gflops == int8_gflops > 0
    assert os.path.getsize(tmp_path / "speed.png") > 0


def test_benchmark_refuses_bad_flags():
    for flags in (["--network", "ssd_resnet50", "--dtypes", "fp16"],
                  ["--network", "ssd_resnet50", "--batch-sizes", "0"],
                  ["--checkpoint", "x", "--dtypes", "int8"]):
        result = run_benchmark(*flags)
        assert result.returncode == 2 and "error:" in result.stderr
