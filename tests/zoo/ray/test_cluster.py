"""``zoo detect --ray``: detection on a Ray cluster of this machine (a Ray started by the run,
or a ``ray.cluster_utils.Cluster`` of two 1-CPU nodes) writes the records ``zoo detect``
writes, through its command line: a bad file named and skipped, a node removed mid-run, the
driver stopped and resumed, ONNX and OpenVINO files on workers that cannot import MXNet,
photos of a Ray Dataset (``zoo.ray.detect``) and of an S3 server on loopback (moto; the
object-store reading of :mod:`zoo.ray.storage`). The zoo loads no Ray unless asked."""
import json
import os
import shlex
import shutil
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
from zoo.errors import DataError, OptionsError
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


def detect_here(prefix, photos, output, *flags):
    """``zoo detect``'s records of ``photos`` (in this process, no Ray)."""
    assert main(["detect", "--checkpoint", prefix, str(photos), "--output", output,
                 "--threshold", str(THRESHOLD), *flags]) == 0
    return results(output)


def renamed(records, names):
    """``records`` with each ``file`` replaced by ``names[file]``."""
    return [dict(record, file=names[record["file"]]) for record in records]


@pytest.mark.slow
def test_a_ray_dataset_of_photo_bytes_writes_zoo_detects_records(prefix, photos, tmp_path):
    """A dataset of ``read_binary_files(include_paths=True)``, held in Ray's object store and
    its files deleted (the workers decode its bytes, and the driver draws and crops from the
    bytes they send back), detects as ``zoo detect`` does on the same photos, its broken one
    named and skipped; ``resume`` skips the paths recorded; a dataset without a ``bytes``
    column is refused in one line."""
    here = detect_here(prefix, photos, str(tmp_path / "here"), "--crops")
    copy, there = tmp_path / "copy", str(tmp_path / "there")
    shutil.copytree(photos, copy)
    names = {str(copy / path.name): str(path) for path in photos.iterdir()}
    # a Ray of its own: the module's cluster of earlier tests may still run
    ray.init(address="local", num_cpus=2, include_dashboard=False,
             object_store_memory=128 << 20)
    try:
        # its rows in its files' order, as zoo detect lists the folder: records follow it
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        dataset = ray.data.read_binary_files(sorted(names), include_paths=True).materialize()
        shutil.rmtree(copy)
        begun = zoo.ray.detect(dataset.limit(4), prefix, output=there, threshold=THRESHOLD,
                               crops=True)  # broken.jpg and three photos
        assert (begun.images, begun.skipped) == (3, 1)
        summary = zoo.ray.detect(dataset, prefix, output=there, threshold=THRESHOLD,
                                 crops=True, resume=True)
        found = results(there)
        assert (summary.images, summary.skipped) == (PHOTOS, 1)
        assert lines(there) == found["images"]  # the three not detected again
        assert_same_records(renamed(found["images"], names), here["images"])
        assert [dict(item, error=item["error"].replace(str(copy), str(photos)))
                for item in renamed(found["skipped"], names)] == here["skipped"]
        for folder in ("pictures", "crops"):
            assert sorted(os.listdir(os.path.join(there, folder))) == sorted(
                os.listdir(os.path.join(str(tmp_path / "here"), folder)))
        with pytest.raises(OptionsError, match=r"^the Ray Dataset has no bytes column \(it "
                                               r"has image, path\): .*read_binary_files"):
            zoo.ray.detect(ray.data.read_images(sorted(names.values())[1:],
                                                include_paths=True),
                           prefix, output=str(tmp_path / "images"))
    finally:
        ray.shutdown()


BUCKET = "photos"


@pytest.fixture
def s3_store(monkeypatch):
    """A local S3 server (moto) on 127.0.0.1 with an empty bucket, and this process's AWS
    environment naming it (the Ray it starts passes it on to its workers); its boto3
    client."""
    server_module = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = "http://%s:%d" % (host, port)
    for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "zoo",
                        "AWS_SECRET_ACCESS_KEY": "zoo", "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=BUCKET)
    yield client
    server.stop()


@pytest.mark.slow
def test_photos_of_an_s3_store_write_zoo_detects_records(prefix, photos, s3_store, tmp_path,
                                                         capsys, caplog):
    """``zoo detect --ray s3://BUCKET/PREFIX/`` on an S3 server of this machine: the records
    of ``zoo detect`` on the same files (named by their URLs), the broken one named and
    skipped; ``--resume`` after a photo is added detects it alone (a recorded photo
    overwritten by garbage is not read again); a URL without ``--ray`` is refused."""
    here = detect_here(prefix, photos, str(tmp_path / "here"))
    names = {}
    for path in sorted(photos.iterdir()):
        s3_store.upload_file(str(path), BUCKET, "archive/" + path.name)
        names["s3://%s/archive/%s" % (BUCKET, path.name)] = str(path)
    s3_store.put_object(Bucket=BUCKET, Key="archive/notes.txt", Body=b"not a photo")
    url, there = "s3://%s/archive/" % BUCKET, str(tmp_path / "there")
    caplog.clear()
    assert main(["detect", "--checkpoint", prefix, "--ray", url, "--output", there,
                 "--threshold", str(THRESHOLD)]) == 0
    found = results(there)
    assert_same_records(renamed(found["images"], names), here["images"])
    broken = "s3://%s/archive/broken.jpg" % BUCKET
    assert [item["file"] for item in found["skipped"] if item["reason"] == "unreadable"] == [
        broken]
    assert "skipped %s: truncated JPEG" % broken in caplog.text
    assert sorted(os.listdir(os.path.join(there, "pictures"))) == sorted(
        os.listdir(os.path.join(str(tmp_path / "here"), "pictures")))
    s3_store.put_object(Bucket=BUCKET, Key="archive/photo00.jpg", Body=b"garbage")
    s3_store.upload_file(str(photos / "photo01.jpg"), BUCKET, "archive/zz.jpg")
    capsys.readouterr()
    assert main(["detect", "--checkpoint", prefix, "--ray", url, "--output", there,
                 "--threshold", str(THRESHOLD), "--resume"]) == 0
    resumed = lines(there)
    assert resumed[:-1] == found["images"]  # the broken file is tried again, in vain
    assert resumed[-1]["file"] == "s3://%s/archive/zz.jpg" % BUCKET
    assert {k: v for k, v in resumed[-1].items() if k not in ("file", "picture")} == {
        k: v for k, v in found["images"][1].items() if k not in ("file", "picture")}
    assert main(["detect", "--checkpoint", prefix, url, "--output", str(tmp_path / "no")]) == 1
    assert capsys.readouterr().err.strip().endswith(
        "input %s: an object-store URL is read on a Ray cluster: add --ray" % url)
