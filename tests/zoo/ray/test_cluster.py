"""``zoo detect --ray``: detection on a Ray cluster of this machine (a Ray started by the run,
or a ``ray.cluster_utils.Cluster`` of two 1-CPU nodes) writes the records ``zoo detect``
writes, through its command line: a bad file named and skipped, a node removed mid-run, the
driver stopped and resumed, ONNX and OpenVINO files on workers that cannot import MXNet. The
zoo loads no Ray unless asked."""
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

import cv2
import numpy as np
import pytest

import zoo.ray

from zoo.cli import main
from zoo.errors import DataError
from zoo.jobs.detect import DetectOptions, detect
from zoo.ray.cluster import LOOPBACK_ONLY

from factories import ROOT, smooth_image

os.environ.setdefault(*LOOPBACK_ONLY)  # Ray's nodes here on 127.0.0.1, where Ray reads it
ray = pytest.importorskip("ray")

THRESHOLD = 0.3
PHOTOS = 10
HEAVY_PHOTOS, HEAVY_SIDE, TILE = 24, 400, 96
"""The slow tests' photos: each runs 26 tiles, so that a run lasts long enough to be cut."""
HEAVY_FLAGS = ("--threshold", str(THRESHOLD), "--tiles", str(TILE), "--batch-size", "1")
"""Their flags: tasks of 4 photos (runner batches of 1), so that each node holds some."""
RUN_SECONDS = 300
"""The longest a run of the slow tests may take: a hung one fails."""


@pytest.fixture(scope="module", autouse=True)
def loopback():
    """Ray on 127.0.0.1 in this process too where another test module imported it before
    this one set :data:`~zoo.ray.cluster.LOOPBACK_ONLY` (Ray reads it on import)."""
    from ray._private import ray_constants
    kept = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    yield
    ray_constants.ENABLE_RAY_CLUSTER = kept


@pytest.fixture(scope="module")
def prefix(detect_prefix):
    return detect_prefix


def write_photos(folder, count, height, width):
    folder.mkdir()
    for seed in range(count):
        assert cv2.imwrite(str(folder / ("photo%02d.jpg" % seed)),
                           smooth_image(height + seed, width - seed, seed))
    return folder


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """A folder of small JPEG photos of odd sizes and one broken JPEG."""
    folder = write_photos(tmp_path_factory.mktemp("photos") / "photos", PHOTOS, 97, 143)
    whole = (folder / "photo00.jpg").read_bytes()
    (folder / "broken.jpg").write_bytes(whole[:len(whole) // 3])
    return folder


@pytest.fixture(scope="module")
def heavy_photos(tmp_path_factory):
    return write_photos(tmp_path_factory.mktemp("heavy") / "photos", HEAVY_PHOTOS, HEAVY_SIDE,
                        HEAVY_SIDE)


@pytest.fixture(scope="module")
def heavy_records(prefix, heavy_photos, tmp_path_factory):
    """``zoo detect``'s records of the heavy photos (in this process, no Ray)."""
    output = str(tmp_path_factory.mktemp("heavy_detect") / "out")
    assert main(["detect", "--checkpoint", prefix, str(heavy_photos), "--output", output,
                 *HEAVY_FLAGS]) == 0
    return results(output)["images"]


@pytest.fixture(scope="module")
def cluster():
    """A Ray cluster of two nodes of 1 CPU each on this machine; the second is ``.worker``."""
    from ray.cluster_utils import Cluster
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                          "include_dashboard": False})
    nodes.worker = nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    assert nodes.address.startswith("127.0.0.1:")
    yield nodes
    nodes.shutdown()


def results(output):
    with open(os.path.join(output, "results.json")) as handle:
        return json.load(handle)


def lines(output):
    """The records of results.jsonl."""
    path = os.path.join(output, "results.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle.read().splitlines()]


def assert_same_records(ours, theirs):
    """The records of two runs are the same pictures, in the same order, with the same
    detections (boxes within 1e-4 pixels)."""
    assert [r["file"] for r in ours] == [r["file"] for r in theirs]
    for mine, other in zip(ours, theirs):
        assert {k: v for k, v in mine.items() if k != "detections"} == \
               {k: v for k, v in other.items() if k != "detections"}
        assert len(mine["detections"]) == len(other["detections"]) > 0
        for a, b in zip(mine["detections"], other["detections"]):
            assert (a["class_id"], a["class_name"]) == (b["class_id"], b["class_name"])
            assert abs(a["score"] - b["score"]) <= 1e-6
            np.testing.assert_allclose(a["box"], b["box"], atol=1e-4)


def test_detect_on_a_ray_of_this_machine_writes_zoo_detects_records(prefix, photos, tmp_path,
                                                                    capsys, caplog):
    """``--ray`` with no address (a word after it that is no address is an input) starts a
    Ray here; the broken file is named and skipped as ``zoo detect`` does."""
    here, there = str(tmp_path / "here"), str(tmp_path / "there")
    assert main(["detect", "--checkpoint", prefix, str(photos), "--output", here,
                 "--threshold", str(THRESHOLD)]) == 0
    expected = capsys.readouterr().out
    caplog.clear()
    assert main(["detect", "--checkpoint", prefix, "--ray", str(photos), "--output", there,
                 "--threshold", str(THRESHOLD)]) == 0
    out, err = capsys.readouterr()
    assert out == expected.replace(here, there)
    assert not ray.is_initialized()  # the Ray it started is gone
    local, cluster = results(here), results(there)
    assert_same_records(cluster["images"], local["images"])
    assert len(cluster["images"]) == PHOTOS and cluster["complete"]
    broken = str(photos / "broken.jpg")
    assert cluster["skipped"] == local["skipped"]
    assert [item["file"] for item in cluster["skipped"]] == [broken]
    assert "skipped %s: truncated JPEG" % broken in caplog.text
    assert lines(there) == cluster["images"]
    assert sorted(os.listdir(os.path.join(there, "pictures"))) == sorted(
        os.listdir(os.path.join(here, "pictures")))


def test_the_zoo_and_its_help_import_no_ray():
    code = ("import sys, contextlib, io; import zoo; from zoo.cli import main\n"
            "for argv in (['--help'], ['detect', '--help']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), "
            "contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "    print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], env=driver_environment(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def driver_environment():
    """This process's environment as it is now (Ray on loopback, and the authentication mode
    the Ray of this process chose: a driver without it is refused), the zoo of this
    checkout."""
    return dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")


def start_detect(output, *argv):
    """``zoo detect ARGV`` in a process of its own (its output's records are read while it
    runs)."""
    return subprocess.Popen([sys.executable, "-m", "zoo", "detect", *argv, "--output", output],
                            env=driver_environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def when_recorded(output, action, least=1):
    """Call ``action()`` on a thread once results.jsonl holds ``least`` records; the thread,
    whose ``.recorded`` is their count then."""
    def watch():
        deadline = time.monotonic() + RUN_SECONDS
        while len(lines(output)) < least and time.monotonic() < deadline:
            time.sleep(0.02)
        thread.recorded = len(lines(output))
        action()
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_node_removed_mid_run_loses_and_repeats_nothing(prefix, heavy_photos, heavy_records,
                                                          cluster, tmp_path):
    output = str(tmp_path / "out")
    process = start_detect(output, "--checkpoint", prefix, str(heavy_photos), "--ray",
                           cluster.address, *HEAVY_FLAGS)
    watcher = when_recorded(output, lambda: cluster.remove_node(cluster.worker))
    out, err = process.communicate(timeout=RUN_SECONDS)
    watcher.join()
    assert process.returncode == 0, err
    assert 0 < watcher.recorded < HEAVY_PHOTOS  # removed mid-run
    found = results(output)
    assert found["complete"] and lines(output) == found["images"]
    assert_same_records(found["images"], heavy_records)
    assert len(os.listdir(os.path.join(output, "pictures"))) == HEAVY_PHOTOS
    cluster.worker = cluster.add_node(num_cpus=1)  # for the tests after this one
    cluster.wait_for_nodes()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_resume_after_the_driver_is_stopped_finishes_without_duplicates(
        prefix, heavy_photos, heavy_records, cluster, tmp_path, capsys, signum):
    output = str(tmp_path / "out")
    process = start_detect(output, "--checkpoint", prefix, str(heavy_photos), "--ray",
                           cluster.address, *HEAVY_FLAGS)
    watcher = when_recorded(output, lambda: process.send_signal(signum))
    _, err = process.communicate(timeout=RUN_SECONDS)
    watcher.join()
    assert process.returncode == 128 + signum, err
    stopped = results(output)
    assert not stopped["complete"] and stopped["stopped_by"] == signal.Signals(signum).name
    assert 0 < len(stopped["images"]) < HEAVY_PHOTOS
    command = err.rsplit("continue with: ", 1)[1].split()
    assert command[:2] == ["zoo", "detect"] and command[-1] == "--resume"
    assert main(shlex.split(" ".join(command[1:]))) == 0, capsys.readouterr().err
    found = results(output)
    assert found["complete"] and lines(output) == found["images"]
    assert_same_records(found["images"], heavy_records)
    assert len(os.listdir(os.path.join(output, "pictures"))) == HEAVY_PHOTOS


FORBID_MXNET = "import sys\nsys.modules['mxnet'] = None  # import mxnet raises ImportError\n"
"""A sitecustomize.py that keeps MXNet out of every Python process it starts in."""


@pytest.mark.slow
@pytest.mark.parametrize("kind", [".onnx", ".xml"])
def test_a_deployed_file_runs_on_workers_without_mxnet(prefix, photos, tmp_path, monkeypatch,
                                                       kind):
    """The workers of a Ray started here cannot import MXNet (a sitecustomize on their path
    forbids it), and detect as ``zoo detect`` does with the same exported ONNX file (on ONNX
    Runtime) or OpenVINO IR; through the Python API (``zoo.ray.detect``, then the job's
    ``DetectOptions(ray=...)``)."""
    pytest.importorskip("onnxruntime" if kind == ".onnx" else "openvino")
    from zoo import artifact
    from zoo.onnx.export import export_artifact
    deployed = export_artifact(artifact.load(prefix), str(tmp_path / "ssd.onnx"))
    if kind == ".xml":
        from zoo.onnx.openvino_runtime import write_ir
        deployed = write_ir(deployed, str(tmp_path / "ssd.xml"), {"dtype": "fp32"})
    here, there = str(tmp_path / "here"), str(tmp_path / "there")
    assert main(["detect", "--checkpoint", deployed, str(photos), "--output", here,
                 "--threshold", str(THRESHOLD)]) == 0
    hook = tmp_path / "no_mxnet"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(FORBID_MXNET)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hook), ROOT]))
    summary = zoo.ray.detect(str(photos), deployed, output=there, threshold=THRESHOLD)
    assert (summary.images, summary.skipped) == (PHOTOS, 1)
    assert_same_records(results(there)["images"], results(here)["images"])
    if kind == ".onnx":  # the artifact needs MXNet there: its error is one line
        with pytest.raises(DataError, match=r"^--ray: a Ray worker failed: \w*Error: .*"
                                            r"mxnet"):
            detect(DetectOptions(checkpoint=prefix, inputs=(str(photos),),
                                 output=str(tmp_path / "mxnet"), ray="local"))
