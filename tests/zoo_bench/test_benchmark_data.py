"""The data pipeline benchmark (zoo_bench.data) on a tiny case: both sides run, the
output is sane, the same images; a smoke test of ``zoo benchmark-data``."""
import re
import subprocess
import sys

import numpy as np
import pytest

import zoo.cli
from zoo.data import VOCDataset, embedded
from zoo.errors import OptionsError
from zoo_bench.data import (Cycled, DataBenchmarkOptions, GluonCVImageFiles,
                                     benchmark_data)


def test_times_both_loaders_and_reports_the_ratio(tmp_path):
    # In a fresh process, as a user runs it: GluonCV's DataLoader forks its workers, and a
    # fork of the test process (its other threads holding locks) may hang.
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "benchmark-data", "--data-root", str(tmp_path / "shapes"),
         "--image-size", "96", "--num-images", "4", "--data-shape", "64", "--batch-size", "2",
         "--batches", "1", "--warmup", "0", "--data-threads", "1"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    machine, images, ours, theirs, ratio = done.stdout.strip().splitlines()[-5:]
    assert "1 workers" in machine and "cores" in machine
    assert images.startswith("images: 4 distinct (median 96x96") and "data shape 64" in images
    speeds = {}
    for side, line in (("ours", ours), ("gluoncv", theirs)):
        assert line.startswith(side + ": ") and "(2 images in " in line
        seconds = float(re.search(r"\(2 images in ([\d.]+) s", line).group(1))
        speeds[side] = float(re.search(r"([\d.]+) img/s", line).group(1))
        assert seconds >= 0 and speeds[side] > 0
    printed = float(re.match(r"speed ratio ours / gluoncv: ([\d.]+)x images/s; ", ratio).group(1))
    assert printed == pytest.approx(speeds["ours"] / speeds["gluoncv"], rel=0.05, abs=0.02)


def test_ours_alone_without_the_comparison(tmp_path):
    result = benchmark_data(DataBenchmarkOptions(
        data_root=str(tmp_path / "shapes"), image_size=64, num_images=2, data_shape=64,
        batch_size=1, batches=2, warmup=1, data_threads=1, compare=None), log=lambda line: None)
    assert result.gluoncv is None and result.ours.images == 2


def test_gluoncv_side_reads_the_same_images_and_labels(tmp_path):
    root = embedded.generate(str(tmp_path / "shapes"), seed=2, num_train=3, num_val=0,
                             image_size=80)
    ours = VOCDataset(root, "train")
    theirs = Cycled(GluonCVImageFiles(ours.records), 5)
    assert len(theirs) == 5
    for index in range(5):
        image, label = ours[index % 3]
        their_image, their_label = theirs[index]
        assert their_image.shape == image.shape
        assert np.abs(their_image.asnumpy().astype(int) - image).mean() < 1  # two JPEG decoders
        np.testing.assert_array_equal(their_label, label[:, [1, 2, 3, 4, 0, 5]])


def test_options_are_checked():
    with pytest.raises(OptionsError, match="a data root is needed for dataset voc"):
        DataBenchmarkOptions(dataset="voc")
    with pytest.raises(OptionsError, match="batch_size must be >= 1"):
        DataBenchmarkOptions(batch_size=0)
    defaults = DataBenchmarkOptions(data_threads=3)
    assert (defaults.timed_batches, defaults.warmup_batches) == (15, 3)


def test_command_help_lists_the_flags_and_keeps_the_old_workers_flag(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_info:
        zoo.cli.main(["benchmark-data", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--dataset", "--data-root", "--split", "--skip-bad", "--data-threads",
                 "--image-size", "--num-images", "--data-shape", "--batch-size", "--batches",
                 "--warmup", "--seed", "--opencv-threads", "--compare", "(default: 448)"):
        assert flag in out, flag
    args = zoo.cli.build_parser("benchmark-data").parse_args(
        ["benchmark-data", "--num-workers", "3"])
    assert args.data_threads == 3 and args.data_root is None
