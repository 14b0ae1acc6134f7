"""What the zoo does to its process: ``import zoo`` nothing; the command line, the ``zoo.``
names that run MXNet and the jobs choose MXNet's synchronous engine and an OpenMP thread per
core before MXNet loads (:func:`zoo.process.use_fast_settings`), each unless the user chose
otherwise, by setting the variable or by loading MXNet first. Each case runs in a fresh
interpreter whose environment has none of the variables, and asks MXNet itself which engine
runs (:data:`PROBE`)."""
import json
import os
import subprocess
import sys

import pytest

from zoo.process import ENGINE_NOTICE, SYNCHRONOUS_ENGINE

from factories import ROOT
CORES = str(len(os.sched_getaffinity(0)))

PROBE = """
import json as _json, os as _os
import mxnet as _mx
try:
    # No Cholesky factor: fails when it runs, which the synchronous engine does at the call
    # and a threaded one later, on a worker thread.
    _failed = _mx.nd.linalg.potrf(_mx.nd.array([[-1.0]]))
    _synchronous = False
    try:
        _failed.wait_to_read()
    except _mx.MXNetError:
        pass
except _mx.MXNetError:
    _synchronous = True
print(_json.dumps({"synchronous": _synchronous,
                   "OMP_NUM_THREADS": _os.environ.get("OMP_NUM_THREADS")}))
"""
"""Appended to each case: whether MXNet runs the synchronous engine, and the OpenMP threads
it loaded with."""


def run_case(code, **variables):
    """Run ``code`` then :data:`PROBE` in a fresh interpreter without MXNet's and OpenMP's
    variables but ``variables``; returns the probe's answer and the stderr."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("MXNET_", "OMP_", "DMLC_"))}
    env.update(PYTHONPATH=ROOT, **variables)
    done = subprocess.run([sys.executable, "-c", code + PROBE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


MXNET_DEFAULTS = {"synchronous": False, "OMP_NUM_THREADS": None}
ZOO_CHOICE = {"synchronous": True, "OMP_NUM_THREADS": CORES}


def test_import_zoo_leaves_the_process_as_it_found_it():
    """Nor do the names that need no MXNet change what MXNet reads; MXNet, imported next by the
    user's own code (GluonCV's, say), runs as it would without the zoo."""
    code = """
import os, sys
environ, hooks = dict(os.environ), list(sys.meta_path)
import zoo
assert dict(os.environ) == environ, set(os.environ.items()) ^ set(environ.items())
assert sys.meta_path == hooks, sys.meta_path
zoo.list_models()
for name in sorted(set(zoo.LAZY) - set(zoo.ON_MXNET)):
    getattr(zoo, name)
assert not [name for name in os.environ if name.startswith(("MXNET_", "OMP_"))]
assert sys.meta_path == hooks and "mxnet" not in sys.modules
"""
    assert run_case(code)[0] == MXNET_DEFAULTS


ENTRY_POINTS = {
    "command line": "import zoo.cli; zoo.cli.main(['check', 'configs/ssd_mobilenetv2.yaml'])",
    "zoo.get_model": "import zoo; zoo.get_model('ssd_mobilenetv2_stride8', data_shape=128)",
    "zoo.get_config": "import zoo; zoo.get_config('ssd_mobilenetv2')",
    "zoo.open_detector": ("import zoo\n"  # as the README's first lines
                          "from zoo.inference.visualize import draw, save_png\n"
                          "zoo.open_detector(%(prefix)r)"),
    "zoo.load_detector": "import zoo; zoo.load_detector(%(prefix)r)",
    "zoo.Detector": "from zoo import Detector",
    "training job": "from zoo.jobs.train import TrainOptions, train",
    "training loop": "from zoo.engine.trainer import Trainer",
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_the_zoos_entry_points_choose_its_settings_before_mxnet_loads(entry, detect_prefix):
    """... quietly: MXNet's notice of the engine it starts is no news."""
    found, err = run_case(ENTRY_POINTS[entry] % {"prefix": detect_prefix})
    assert found == ZOO_CHOICE
    assert ENGINE_NOTICE not in err


def test_the_users_variables_are_kept():
    found, err = run_case(ENTRY_POINTS["zoo.get_model"], OMP_NUM_THREADS="1",
                          MXNET_ENGINE_TYPE="ThreadedEnginePerDevice")
    assert found == {"synchronous": False, "OMP_NUM_THREADS": "1"}
    assert ENGINE_NOTICE + "ThreadedEnginePerDevice" in err  # MXNet's word on the user's choice


def test_the_synchronous_engine_chosen_by_the_user_starts_quietly_too():
    found, err = run_case(ENTRY_POINTS["zoo.get_model"], MXNET_ENGINE_TYPE=SYNCHRONOUS_ENGINE)
    assert found == ZOO_CHOICE and ENGINE_NOTICE not in err
    found, err = run_case("", MXNET_ENGINE_TYPE=SYNCHRONOUS_ENGINE)
    assert found["synchronous"] and ENGINE_NOTICE in err, "MXNet writes it unless the zoo starts it"


def test_mxnet_loaded_first_keeps_the_settings_it_loaded_with():
    """A process that loaded MXNet before using the zoo (its own GluonCV code, say) runs the
    zoo on them."""
    code = "import mxnet, zoo; zoo.get_model('ssd_mobilenetv2_stride8', data_shape=128)"
    assert run_case(code)[0] == MXNET_DEFAULTS


def test_help_says_what_is_chosen_and_how_to_choose_otherwise(capsys):
    from zoo.cli import main
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "MXNET_ENGINE_TYPE=%s" % SYNCHRONOUS_ENGINE in text
    assert "OMP_NUM_THREADS=%s here" % CORES in text
    assert "Set either variable yourself" in text and "import zoo alone changes nothing" in text
