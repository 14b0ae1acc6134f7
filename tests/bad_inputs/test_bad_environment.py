"""Bad-input corpus, the process's surroundings: environment variables the zoo and MXNet read
(checked before MXNet loads: it aborts the whole process on some), ``zoo launch``'s
scheduler port and ssh configuration (checked before anything starts), and image sizes no
image has."""
import os
import socket
import subprocess
import sys

import pytest

from zoo.cli import main
from zoo.data import embedded
from zoo.distributed import launcher

from factories import one_error_line

from factories import ROOT


# -- Environment variables ---------------------------------------------------------------------

THREADS = "a whole number of threads, 1 or more (unset: one per core)"
ENVIRONMENT_FAULTS = [
    # (variable, value, what the line says after "NAME='value': expected ")
    ("OMP_NUM_THREADS", "0", THREADS),
    ("OMP_NUM_THREADS", "4,2", THREADS),
    ("OMP_NUM_THREADS", "", THREADS),
    ("MXNET_ENGINE_TYPE", "ThreadedEnginePooled",
     "one of NaiveEngine, ThreadedEngine, ThreadedEnginePerDevice (unset: NaiveEngine)"),
    ("ZOO_CONNECT_TIMEOUT", "soon", "a positive number of seconds"),
    ("ZOO_CONNECT_TIMEOUT", "-5", "a positive number of seconds"),
]


@pytest.mark.parametrize("name, value, expected", ENVIRONMENT_FAULTS,
                         ids=["%s=%s" % case[:2] for case in ENVIRONMENT_FAULTS])
def test_a_variable_that_cannot_be_is_one_line_naming_it(monkeypatch, capsys, tmp_path, name,
                                                         value, expected):
    monkeypatch.setenv(name, value)
    assert main(["eval", "--checkpoint", str(tmp_path / "m"), "--data-root",
                 str(tmp_path)]) == 1
    assert one_error_line(capsys, "eval") == "zoo eval: error: %s=%r: expected %s" % (name, value,
                                                                               expected)


def test_omp_num_threads_mxnet_cannot_read_is_one_line_not_an_abort(tmp_path):
    """MXNet aborts the process (SIGABRT, exit -6) on reading it when it loads: the command
    line checks it before anything imports MXNet."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="abc")
    done = subprocess.run([sys.executable, "-m", "zoo", "eval", "--checkpoint",
                           str(tmp_path / "m"), "--data-root", str(tmp_path)],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True,
                          timeout=300)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", "zoo eval: error: OMP_NUM_THREADS='abc': expected %s\n" % THREADS)


def test_healthy_variables_pass(monkeypatch, capsys, tmp_path):
    """The values MXNet reads well stay silent: the command goes on to its own error."""
    for name, value in (("OMP_NUM_THREADS", " 2 "), ("MXNET_ENGINE_TYPE", "ThreadedEngine"),
                        ("ZOO_CONNECT_TIMEOUT", "2.5"), ("ZOO_MAX_PIXELS", "4000000")):
        monkeypatch.setenv(name, value)
    assert main(["eval", "--checkpoint", str(tmp_path / "m"), "--data-root",
                 str(tmp_path)]) == 1
    line = one_error_line(capsys, "eval")
    assert "no complete artifact" in line and "expected" not in line, line


# -- zoo launch --------------------------------------------------------------------------------

def test_a_scheduler_port_in_use_is_refused_before_anything_starts(capsys, monkeypatch):
    started = []
    monkeypatch.setattr(launcher, "start", lambda specs, launched: started.append(specs))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["launch", "--port", str(port), "--", "true"]) == 1
    assert one_error_line(capsys, "launch") == (
        "zoo launch: error: --port %d: in use on 127.0.0.1, where the scheduler listens: "
        "give a free port, or 0 for any" % port)
    assert started == []


def test_a_free_scheduler_port_passes():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launcher.check_scheduler_address("127.0.0.1", port)  # no error


@pytest.mark.parametrize("config, reason", [("folder", "Is a directory"),
                                            ("missing", "No such file or directory")])
def test_an_ssh_config_that_is_no_readable_file_is_refused(tmp_path, capsys, monkeypatch,
                                                           config, reason):
    started = []
    monkeypatch.setattr(launcher, "start", lambda specs, launched: started.append(specs))
    (tmp_path / "folder").mkdir()
    path = str(tmp_path / config)
    assert main(["launch", "--ssh-config", path, "--", "true"]) == 1
    assert one_error_line(capsys, "launch") == (
        "zoo launch: error: --ssh-config %s: not a readable ssh configuration file (%s)"
        % (path, reason))
    assert started == []


# -- Image sizes no image has ------------------------------------------------------------------

@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return embedded.generate(str(tmp_path_factory.mktemp("sizes") / "voc"), seed=1,
                             num_train=2, num_val=1, image_size=64)


@pytest.mark.parametrize("tag, value", [("width", "1e999"), ("height", "inf"),
                                        ("width", "Infinity"), ("height", "-1e999")])
def test_a_non_finite_voc_image_size_is_one_line(pristine, tmp_path, capsys, tag, value):
    import shutil
    root = shutil.copytree(pristine, str(tmp_path / "voc"))
    with open(os.path.join(root, "ImageSets", "Main", "train.txt")) as stream:
        first = stream.read().split()[0]
    xml = os.path.join(root, "Annotations", first + ".xml")
    with open(xml) as stream:
        text = stream.read()
    with open(xml, "w") as stream:
        stream.write(text.replace("<%s>64</%s>" % (tag, tag), "<%s>%s</%s>" % (tag, value, tag)))
    assert main(["prepare-data", "--format", "voc", "--root", root, "--split", "train",
                 "--output", str(tmp_path / "rec" / "train")]) == 1
    line = one_error_line(capsys, "prepare-data")
    assert line.startswith("zoo prepare-data: error: %s: image size " % xml), line
    assert "is not a finite number of pixels; --skip-bad skips such an image" in line
