"""tools/benchmark_data.py on a tiny case: both sides run, the output is sane, the same images."""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np

from zoo.data import VOCDataset, embedded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "benchmark_data.py")


def load_tool():
    spec = importlib.util.spec_from_file_location("benchmark_data", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tool_times_both_loaders_and_prints_the_ratio(tmp_path):
    out = subprocess.run(
        [sys.executable, TOOL, "--data-root", str(tmp_path / "shapes"), "--image-size", "96",
         "--num-images", "4", "--data-shape", "64", "--batch-size", "2", "--batches", "1",
         "--warmup", "0", "--num-workers", "1"],
        capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=120).stdout
    machine, images, ours, theirs, ratio = out.splitlines()
    assert "1 workers" in machine and "cores" in machine
    assert images.startswith("images: 4 distinct (median 96x96") and "data shape 64" in images
    rates = {}
    for side, line in (("ours", ours), ("gluoncv", theirs)):
        assert line.startswith(side + ": ") and "(2 images in " in line
        rates[side] = float(re.search(r"([\d.]+) img/s", line).group(1))
        assert rates[side] > 0
    printed = float(re.match(r"speed ratio ours / gluoncv: ([\d.]+)x images/s; ", ratio).group(1))
    assert abs(printed - rates["ours"] / rates["gluoncv"]) <= 0.02 * printed + 0.01


def test_gluoncv_side_reads_the_same_images_and_labels(tmp_path):
    root = embedded.generate(str(tmp_path / "shapes"), seed=2, num_train=3, num_val=0,
                             image_size=80)
    ours = VOCDataset(root, "train")
    tool = load_tool()
    theirs = tool.Cycled(tool.GluonCVImageFiles(ours.records), 5)
    assert len(theirs) == 5
    for index in range(5):
        image, label = ours[index % 3]
        their_image, their_label = theirs[index]
        assert their_image.shape == image.shape
        assert np.abs(their_image.asnumpy().astype(int) - image).mean() < 1  # two JPEG decoders
        np.testing.assert_array_equal(their_label, label[:, [1, 2, 3, 4, 0, 5]])
