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


def test_benchmark_tool_reports_speed_and_flops():
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "benchmark.py"), "--network",
         "ssd_mobilenetv2_stride8", "--data-shape", "192", "--runs", "1", "--warmup", "0"],
        capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    peak_line, ours_line = out.splitlines()[:2]
    assert "GFLOP/s" in peak_line and float(peak_line.split(":")[1].split()[0]) > 0
    assert ours_line.startswith("ours: ssd_mobilenetv2_stride8 192x192")
    assert "img/s" in ours_line and "GFLOPs/img" in ours_line
