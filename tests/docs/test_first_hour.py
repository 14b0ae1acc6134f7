"""A user's first hour: set-up that installs only, install lines that work from a checkout,
the detector benchmark on a folder of any images, no MXNet log spam, and training that says
what it trains and where the artifact is."""
import os
import re
import subprocess
import sys

import numpy as np
from PIL import Image

from zoo.cli import main as zoo_main

from factories import ROOT


def test_make_install_sets_up_and_runs_nothing():
    commands = subprocess.run(["make", "-n", "-B", "install"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    assert re.search(r"pip install .*-e '\.\[test\]'", commands)
    assert "quickstart" not in commands and "pytest" not in commands


def test_make_help_lists_each_target_in_one_line_and_runs_nothing():
    makefile = open(os.path.join(ROOT, "Makefile")).read()
    targets = re.search(r"^\.PHONY: (.*)$", makefile, re.M).group(1).split()
    # as a user types it, not as a make that runs this suite (`make test`) would: without
    # its MAKELEVEL, a nested make prints "Entering directory" lines
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    commands = subprocess.run(["make", "-n", "help"], cwd=ROOT, capture_output=True,
                              text=True, check=True, env=env).stdout
    assert "pip" not in commands and "pytest" not in commands and "venv" not in commands
    done = subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sorted(line.split()[1] for line in lines) == sorted(targets)
    assert all(line.startswith("make ") and len(line.split()) > 2 for line in lines)
    assert {"demo", "test"} <= set(targets)


def test_readme_installs_the_checkout_not_an_index_package():
    readme = open(os.path.join(ROOT, "README.md")).read()
    package = re.search(r"name = (\S+)", open(os.path.join(ROOT, "setup.cfg")).read()).group(1)
    lines = [line for line in readme.splitlines() if "pip install" in line]
    assert lines and not [line for line in lines if package in line]
    assert "make install" in readme and "pip install -e ." in readme


def test_benchmark_detector_reads_every_image_format_and_names_the_rest(tmp_path, capsys):
    folder = tmp_path / "mixed"
    (folder / "sub").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, size in (("a.jpg", (70, 50)), ("b.JPEG", (40, 64)), ("c.png", (64, 64)),
                       ("d.bmp", (50, 30)), ("e.webp", (30, 50)), ("sub/f.jpg", (30, 30))):
        Image.fromarray(rng.integers(0, 255, size[::-1] + (3,), dtype=np.uint8)).save(
            folder / name)
    (folder / "notes.txt").write_text("not an image")
    (folder / "cut.jpg").write_bytes((folder / "a.jpg").read_bytes()[:300])
    assert zoo_main(["benchmark-detector", "--images", str(folder), "--data-shape", "128",
                     "--batch-size", "2", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "batch 2, 5 images:" in out
    machine = out.splitlines()[0]  # the figures name the machine and the OpenMP settings
    assert machine.startswith("machine: %d cores (" % len(os.sched_getaffinity(0)))
    assert machine.endswith("; OMP_NUM_THREADS=%s, OMP_WAIT_POLICY=%s, GOMP_SPINCOUNT=%s" % tuple(
        os.environ.get(name) for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")))
    skipped = [line for line in out.splitlines() if line.startswith("skipped")]
    assert skipped == ["skipped 2 file(s) not readable as images: cut.jpg: truncated JPEG "
                       "(no end marker FFD9); notes.txt: not an image file (unknown format)"]


def test_binding_graphs_prints_no_mxnet_subgraph_notices(tmp_path):
    # A fresh process without the test suite's environment: the zoo must silence it itself.
    code = ("import zoo, numpy as np\n"
            "model = zoo.get_model('faster_rcnn_fpn_mobilenetv2', data_shape=128,"
            " max_size=160, num_classes=2)\n"
            "model.init_params(seed=0)\n"
            "zoo.Detector.from_model(model)(np.zeros((100, 120, 3), np.uint8))\n"
            "import mxnet as mx\n"
            "print('VERBOSE', __import__('os').environ.get('MXNET_SUBGRAPH_VERBOSE'))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXNET_")}
    done = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "VERBOSE 0" in done.stdout
    assert "Subgraph backend" not in done.stdout + done.stderr
