"""Process settings MXNet reads once, when it loads: the zoo's entry points choose them
before MXNet loads (:func:`use_fast_settings`), each only where the user has not set it,
and ``import zoo`` alone chooses nothing; and the environment variables the zoo and MXNet
read, checked (:func:`check_environment`, :func:`variable`)."""
import importlib.abc
import importlib.util
import math
import os
import re
import sys
import tempfile

from zoo.errors import OptionsError, quoted

__all__ = ["CHOSEN", "ENGINE_NOTICE", "ENGINES", "SYNCHRONOUS_ENGINE", "VARIABLES",
           "check_environment", "configure", "gpu_ids", "running", "use_fast_settings",
           "users_environment", "variable"]

SYNCHRONOUS_ENGINE = "NaiveEngine"
ENGINE_NOTICE = "MXNet start using engine: "
"""What MXNet logs on stderr when it starts an engine chosen by the environment."""
ENGINES = (SYNCHRONOUS_ENGINE, "ThreadedEngine", "ThreadedEnginePerDevice")
"""The engines MXNet 1.9 has (``MXNET_ENGINE_TYPE``)."""


def _is_count(value):
    """A whole number, 1 or more."""
    return re.fullmatch(r"\s*[0-9]+\s*", value) is not None and int(value) >= 1


def _is_threads(value):
    """A whole number from 1 to 2**31 - 1, as MXNet's ``dmlc::GetEnv<int>`` reads one."""
    return _is_count(value) and int(value) < 2 ** 31


def _is_seconds(value):
    try:
        return 0 < float(value) < math.inf
    except ValueError:
        return False


VARIABLES = {
    # name: (whether a value is good, what is expected)
    "OMP_NUM_THREADS": (_is_threads, "a whole number of threads, 1 or more (unset: one per "
                                   "core)"),
    "MXNET_ENGINE_TYPE": (ENGINES.__contains__, "one of %s (unset: %s)"
                          % (", ".join(ENGINES), SYNCHRONOUS_ENGINE)),
    "ZOO_MAX_PIXELS": (_is_count, "a positive whole number of pixels"),
    "ZOO_CONNECT_TIMEOUT": (_is_seconds, "a positive number of seconds"),
}
"""The environment variables the zoo reads or sets for MXNet. MXNet aborts the whole
process (SIGABRT, no Python error, no word of which variable) on an ``OMP_NUM_THREADS`` it
cannot read as a whole number, and stops with a traceback on an unknown engine."""


def variable(name, environ=os.environ):
    """The value of the variable ``name`` of :data:`VARIABLES` (None if unset), or an
    :class:`~zoo.errors.OptionsError` naming it if it cannot be."""
    value = environ.get(name)
    good, expected = VARIABLES[name]
    if value is not None and not good(value):
        raise OptionsError("%s=%s: expected %s" % (name, quoted(value), expected))
    return value


def check_environment(environ=os.environ):
    """Raise :class:`~zoo.errors.OptionsError` for the first variable of :data:`VARIABLES`
    whose value cannot be: the command line calls it before anything loads MXNet."""
    for name in VARIABLES:
        variable(name, environ)


def use_fast_settings():
    """Choose the settings the zoo runs fastest with for this process and those it starts
    (:func:`configure` on ``os.environ``), and have MXNet's engine started without its
    notice; only while MXNet is not loaded (it reads them once, when it loads: where it is,
    the process keeps the settings it loaded with). Returns whether they were chosen. The
    command line calls it first, the ``zoo.`` names that run MXNet before their module
    loads, and the packages :mod:`zoo.jobs` and :mod:`zoo.engine` when imported."""
    if "mxnet" in sys.modules:  # None there: the process forbids importing MXNet
        return False
    if configure() and not any(isinstance(finder, EngineStarter) for finder in sys.meta_path):
        # MXNet is loaded where it is used, by the zoo's modules or the user's (an ONNX
        # deployment may have none): the engine starts right after its first import.
        sys.meta_path.insert(0, EngineStarter())
    return True


CHOSEN = {}
"""The variables :func:`configure` set in this process's own environment, with the values it
chose: the zoo's choices, not the user's (see :func:`users_environment`)."""


def configure(environ=os.environ):
    """Set the zoo's defaults in ``environ`` (a process environment), each only where it is
    unset; returns whether MXNet will run the synchronous engine (the zoo's choice, here or
    in the process that started this one)."""
    # MXNet's CPU operators otherwise run element-wise work (ReLU6's clip, batch norm) on one
    # OpenMP thread here; all cores halve the training step.
    _choose(environ, "OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    # The threaded engine runs MXNet's own operators (box_nms, topk, ROIAlign...) on worker
    # threads whose OpenMP teams contend with MKL-DNN's: on 2 cores a Faster R-CNN FPN takes
    # 0.35 s per 600x1000 image in int8 on the synchronous engine against 0.68 s on the
    # threaded one, and a training step the same time on both. ps-lite's asynchronous
    # pushes need the threaded engine: a process of a cluster (DMLC_ROLE set) keeps MXNet's.
    if "DMLC_ROLE" not in environ:
        _choose(environ, "MXNET_ENGINE_TYPE", SYNCHRONOUS_ENGINE)
    # MXNet logs "Subgraph backend MKLDNN is activated." on every executor it binds with
    # MKL-DNN's fusion (graph_executor.cc), some 21 times in one FPN validation: no news.
    _choose(environ, "MXNET_SUBGRAPH_VERBOSE", "0")
    return environ.get("MXNET_ENGINE_TYPE") == SYNCHRONOUS_ENGINE


def _choose(environ, name, value):
    """Set ``name`` to ``value`` in ``environ`` if unset, noted in :data:`CHOSEN` when
    ``environ`` is this process's."""
    if name not in environ:
        environ[name] = value
        if environ is os.environ:
            CHOSEN[name] = value


def users_environment(environ=os.environ):
    """``environ`` without the variables :func:`configure` chose in this process (those still
    at the chosen value): what the user set. A launcher chooses them again for the processes
    it starts: ``zoo launch`` shares the cores among its local workers, where each inheriting
    all of them ran its training 2.8 times slower (2 workers on 2 cores)."""
    return {name: value for name, value in environ.items()
            if environ is not os.environ or CHOSEN.get(name) != value}


class EngineStarter(importlib.abc.MetaPathFinder):
    """Finds ``mxnet`` once, as the finders after it do, with a loader that starts the
    engine right after the package has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "mxnet":
            return None
        # One import only (the import lock of mxnet keeps a second thread out), and the
        # search below must not come back here.
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = EngineStartingLoader(spec.loader)
        return spec


class EngineStartingLoader:
    """A package's loader that starts MXNet's engine once the package has run; anything
    else (resource readers, ``get_data``) is the wrapped loader's."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        start_engine_quietly(module)


def start_engine_quietly(mxnet):
    """Start the engine of ``mxnet`` (the imported package) with its notice of the engine's
    name left out of stderr (the zoo's choice is no news to the user); anything else MXNet
    writes there is kept. MXNet writes the notice on its first operation, not on import."""
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            mxnet.nd.zeros((1,)).wait_to_read()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines(True):
                if ENGINE_NOTICE not in line:
                    sys.stderr.write(line)


DEVICES = re.compile(r"cpu|gpu(\d+(?:,\d+)*)")


def gpu_ids(devices):
    """The GPUs a device string names: ``[]`` for ``"cpu"``, ``[0, 1]`` for ``"gpu0,1"``;
    ValueError for anything else (the one parser of ``--ctx`` and ``TrainerOptions.ctx``)."""
    match = DEVICES.fullmatch(devices) if isinstance(devices, str) else None
    if not match:
        raise ValueError("must be 'cpu' or 'gpuN[,M...]', got %r" % (devices,))
    return [int(i) for i in match.group(1).split(",")] if match.group(1) else []


def running(pid):
    """Whether a process ``pid`` runs (one of another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
