import ctypes
import gc
import os
import subprocess
import sys

os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
# The suite runs in two worker processes (make test): OpenMP threads that spin between
# operators would take the other worker's core.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The tests mirror the package (tests/zoo/jobs/test_detect.py tests zoo/jobs/detect.py, the
# bad-input corpora stay together in tests/bad_inputs/). Some share helpers by importing another
# test module by its name, wherever it stands: every folder of tests/ that holds tests is on
# the path, as tests/ itself is.
# The checkout's root goes on the path first: tests/zoo/ and tests/symbols/ have no
# __init__.py, and with tests/ on the path (pytest puts it there for this file) they would be
# taken for the packages `zoo` and `symbols` wherever the root is not on it (`pytest` run from
# another folder: the editable install finds the packages only after the path is searched).
_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(_TESTS)]
sys.path[2:2] = sorted(folder for folder, _, names in os.walk(_TESTS)
                       if folder != _TESTS and any(n.startswith("test_") and n.endswith(".py")
                                                   for n in names))

import zoo  # noqa: E402
from zoo import process  # noqa: E402

# The suite's process runs as the command line does (the engine, the threads), and so do
# the processes it starts, which inherit them: chosen before MXNet loads.
process.use_fast_settings()

import mxnet as mx  # noqa: E402
import pytest  # noqa: E402

from zoo.data import embedded  # noqa: E402
import testhosts  # noqa: E402

from factories import ROOT, spread_ssd_artifact  # noqa: E402

_LIBC = ctypes.CDLL("libc.so.6")

SETTINGS_VARIANTS = {
    # config: the config it only renumbers (same graph builders; COCO's classes, sizes and
    # proposal counts), whose end-to-end tests (training, int8, ONNX) therefore cover it
    "faster_rcnn_resnet50_gluoncv_coco": "faster_rcnn_resnet50_gluoncv_voc",
    "ssd_resnet50_v1_gluoncv_coco": "ssd_resnet50_v1_gluoncv_voc",
    "ssd_mobilenet1.0_gluoncv_coco": "ssd_mobilenet1.0_gluoncv_voc",
    "ssd_mobilenet0.25_gluoncv_coco": "ssd_mobilenet0.25_gluoncv_voc",
}
END_TO_END_MODELS = sorted(set(zoo.list_models()) - set(SETTINGS_VARIANTS))
"""The registered models the end-to-end tests run: all but :data:`SETTINGS_VARIANTS`."""

END_TO_END_QUICK = {name for name in END_TO_END_MODELS
                    if name.endswith(("_mobilenetv2", "_mobilenetv2_stride8"))}
"""The models `make test` runs end to end: every architecture on MobileNetV2. The others run
end to end in `make test-slow`: ResNet-50 and InceptionV3, the ResNet-101 twins (ResNet-50
with 17 more stage-3 units, test_model.test_resnet101_adds_exactly_17_stage3_units) and
GluonCV's ResNet-50 and MobileNet v1 layouts (proved against GluonCV's own networks in
tests/zoo/gluoncv/), about 210 s of the two workers' time in `make test`. Every one of them
is still built, exported and proved against its graph in `make test`, and all but the
ResNet-101 twins are run forward and quantized there (:func:`graph_runs`)."""
END_TO_END_RUNS = [name if name in END_TO_END_QUICK else pytest.param(name, marks=pytest.mark.slow)
                   for name in END_TO_END_MODELS]
""":data:`END_TO_END_MODELS` for the longest end-to-end runs (training an epoch, the ONNX
export), the ones outside :data:`END_TO_END_QUICK` in `make test-slow`."""

RESNET101_TWINS = {name for name in zoo.list_models() if name.endswith("_resnet101")}
"""The registered models that are their ResNet-50 twin with 17 more stage-3 units
(test_model.test_resnet101_adds_exactly_17_stage3_units proves it, and their parameter
counts, files and names are checked in `make test`): the same graph builders."""


def graph_runs(names):
    """``names`` for the tests that run each model's graph (forward, backward, int8): the
    ResNet-101 twins and :data:`SETTINGS_VARIANTS` in `make test-slow` only, as their twins
    run the same builders in `make test` (about 50 s of the two workers' time)."""
    return [pytest.param(name, marks=pytest.mark.slow)
            if name in RESNET101_TWINS or name in SETTINGS_VARIANTS else name for name in names]


@pytest.fixture(scope="module")
def models():
    """Every registered model at its smallest supported data shape, built once a file (2 s):
    a model keeps the parameters ``init_params`` gives it, and for the whole session these
    held 2.3 GB of a worker after test_model.py."""
    built = {}
    for name in zoo.list_models():
        shape = zoo.get_config(name)["shapes"]
        built[name] = zoo.get_model(name, data_shape=min(shape))
    return built


@pytest.fixture(scope="session")
def faster_rcnn():
    """A small Faster R-CNN (C4, MobileNetV2, 3 classes, 128 x 224 reference input) with
    seeded random parameters, shared by the detector and input tests."""
    model = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=128, max_size=224,
                          num_classes=3)
    model.init_params(seed=0)
    return model


@pytest.fixture(scope="session")
def shapes(tmp_path_factory):
    """A tiny embedded dataset shared by the command-line and fault tests: 8 training and 4
    held-out images of 128 pixels."""
    return embedded.generate(str(tmp_path_factory.mktemp("shapes")), seed=1, num_train=8,
                             num_val=4, image_size=128)


@pytest.fixture(scope="session")
def shapes192(tmp_path_factory):
    """The same tiny dataset at 192 pixels (the training and tool tests' size)."""
    return embedded.generate(str(tmp_path_factory.mktemp("shapes192")), seed=1, num_train=8,
                             num_val=4, image_size=192)


@pytest.fixture(scope="session")
def detect_prefix(tmp_path_factory):
    """A small SSD artifact of :data:`factories.DETECT_CLASSES` whose class scores spread and
    clear a 0.3 threshold (:func:`factories.spread_ssd_artifact`), shared by the ``zoo
    detect`` and EXIF tests."""
    return spread_ssd_artifact(str(tmp_path_factory.mktemp("detect_artifact") / "ssd"))


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """`make demo`'s job (``zoo quickstart``) run once a session in a process of its own, as
    the Makefile runs it (about 4 minutes): ``(its output folder, the finished process)``.
    ``make test-accuracy`` checks its band from the process's lines, and starts the SSD
    parity check from its detector's trunk, as ``zoo benchmark-parity`` does by default."""
    output = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "zoo", "quickstart", "--output-dir",
                           str(output)], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=3600)
    return str(output), done


@pytest.fixture(scope="session")
def test_hosts(tmp_path_factory):
    """Two test hosts in network namespaces (tests/testhosts.py), shared by the
    session's multi-host tests and removed at its end, whatever happened; the tests that use them
    skip, naming it, where this machine lacks a requirement."""
    missing = testhosts.missing_requirement()
    if missing:
        pytest.skip("test hosts need root, ip, unshare and sshd: %s" % missing)
    hosts = testhosts.TestHosts(2, str(tmp_path_factory.mktemp("testhosts")))
    hosts.start()
    try:
        yield hosts
    finally:
        hosts.close()


TRIM_GROWTH = 512 << 20
"""Growth of the resident size, in bytes since the last hand-back, after which a test's
freed memory is handed back at once, not at the end of its file: files that build one big
model per parameter would otherwise stack them."""
_trimmed_at = [0]


def _give_back_freed_memory():
    gc.collect()
    mx.nd.waitall()
    _LIBC.malloc_trim(0)
    _trimmed_at[0] = _resident_bytes()


def _resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module", autouse=True)
def _return_freed_memory():
    """After each test file, hand the memory its models freed back to the system: glibc
    keeps freed heap pages mapped, and a worker's resident size would be the sum of every
    file's peak instead of the largest."""
    yield
    _give_back_freed_memory()


@pytest.fixture(autouse=True)
def _return_freed_memory_of_big_tests():
    """The same after any test that grew the worker by :data:`TRIM_GROWTH` (reading the
    resident size costs microseconds; collecting after every test would cost minutes)."""
    yield
    if _resident_bytes() > _trimmed_at[0] + TRIM_GROWTH:
        _give_back_freed_memory()


@pytest.fixture
def no_graph(monkeypatch):
    """Fail the test if a backbone graph is built: config field errors come before any."""
    def refuse(*args, **kwargs):
        raise AssertionError("a graph was built before the config was validated")
    monkeypatch.setattr("zoo.model.BackboneGraph", refuse)
    monkeypatch.setattr("symbols.backbones.get_backbone", refuse)


def forward(sym, arg_params, aux_params, **inputs):
    """Run ``sym`` once in inference mode; returns the list of outputs as numpy arrays."""
    args = dict(arg_params)
    args.update({k: mx.nd.array(v) for k, v in inputs.items()})
    executor = sym.bind(mx.cpu(), args, aux_states=dict(aux_params), grad_req="null")
    return [out.asnumpy() for out in executor.forward(is_train=False)]


def runner_inputs(images, preprocessing):
    """``[(data, im_info)]``, one per image: the graph's inputs as the one batch runner
    (:class:`zoo.inference.runner.BatchRunner`) makes them, each image on its own canvas."""
    from zoo.inference.runner import BatchRunner, ImageList
    batches = BatchRunner(preprocessing).batches(ImageList(images), 1)
    return [(batch.data, batch.im_info) for batch in batches]
