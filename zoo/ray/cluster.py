"""``zoo detect --ray``: ``zoo detect`` with its detection spread over a Ray cluster's
cores (Ray Data actors), everything else as ``zoo detect`` does it: the job
(:func:`zoo.jobs.detect.detect`) of options with ``ray`` set runs its detector through a
:class:`ClusterInference`.

This process (the driver) lists the inputs, holds the ``--output`` folder's lock and writes
every file with ``zoo detect``'s own run (:func:`zoo.jobs.detect.detect`): its records, its
``--resume``, its stop on SIGINT or SIGTERM and its atomic files are those of ``zoo detect``,
and so is every record. Only the detecting moves: Ray Data hands the inputs' paths, a few
batches at a time, to a pool of actors, each holding one detector (:func:`zoo.open_detector`
of the same checkpoint and epoch) on the CPUs Ray gives it (its OpenMP and decoding threads
sized to them), which decodes and detects with the zoo's one batch runner and sends back each
picture's rows, in input order. Drawn pictures and crops are made here from the rows, each
such photo decoded again (``--no-pictures`` without ``--crops`` reads no photo here).

Photos need not be files of the driver: an ``s3://bucket/prefix/`` URL is listed here and
each photo read by the actor detecting it (:mod:`zoo.ray.storage`), and a Ray Dataset of
``bytes`` and ``path`` columns (``ray.data.read_binary_files(paths, include_paths=True)``)
brings its photos' bytes to the actors; ``path`` names each photo in its record, as a URL
does, and ``--resume`` skips the names recorded. Where such a photo is drawn or cropped,
its actor sends its bytes back with the rows.

An exported ``.onnx`` or ``.xml`` file runs on the actors without MXNet. An actor or node
lost mid-run is replaced by Ray and its batch run again: a picture is recorded once, when its
rows reach the driver. The paths must name the same files on every node (a shared file
system); videos are refused (a batch of frames would decode its video from the start).

Ray is imported only when such a run starts: ``import zoo``, ``zoo --help`` and ``zoo
detect`` without ``--ray`` load none of it.
"""
import builtins
import collections
import contextlib
import logging
import os
import re
import signal
import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

from zoo import errors
from zoo.checkpoint import open_detector
from zoo.errors import DataError, MissingPackage, OptionsError
from zoo.inference.inputs import Input, InputImages
from zoo.inference.runner import preparing_threads
from zoo.inference.tiles import detector_outputs
from zoo.ray.storage import is_url, list_url, read_url
from zoo.signals import STOP_SIGNALS

__all__ = ["ClusterInference", "DATASET_COLUMNS", "LOCAL", "LOOPBACK_ONLY", "check_cluster",
           "is_address", "is_dataset", "remote_inputs"]

LOCAL = "local"
"""The address that starts a Ray of this machine for the run (``--ray`` without one)."""
ADDRESS = re.compile(r"auto|local|[a-z][a-z0-9+.-]*://\S+|[^\s/:]+:[0-9]+")
"""What a Ray address looks like: ``auto``, ``local``, ``ray://HOST:PORT``, ``HOST:PORT``."""
OBJECT_STORE_BYTES = 256 << 20
"""The object store of a Ray started for a run: it holds paths and rows only (the images
are read where they are detected), and Ray's default takes 30% of the machine's memory."""
TASK_BATCHES = 4
"""Runner batches in one Ray task: the unit a node's loss repeats, large enough that Ray's
cost per task is small beside detecting and that the actor's runner decodes ahead."""
LOOPBACK_ONLY = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
"""The environment variable that has Ray take the loopback address (127.0.0.1) for this
machine's node rather than its network interface's, read when Ray is imported: a Ray started
for one run serves no other machine."""
RAY_LOGGERS = ("ray", "ray.data", "ray.serve")
"""Ray's Python loggers, quieted to errors for a run: the progress bar is the zoo's."""
DATASET_COLUMNS = ("bytes", "path")
"""The columns of a Ray Dataset detected on: each photo's file and its name, as
``ray.data.read_binary_files(paths, include_paths=True)`` gives them."""
FETCH_THREADS = 8
"""Photos an actor reads from an object store at once: reading waits on the network."""


def is_address(word):
    """Whether ``word`` is a Ray address (:data:`ADDRESS`) rather than an input path (an
    object-store URL is an input)."""
    return ADDRESS.fullmatch(word) is not None and not is_url(word)


def is_dataset(spec):
    """Whether an input ``spec`` is a Ray Dataset (given from Python) rather than a path."""
    return not isinstance(spec, str)


def remote_inputs(specs, recursive):
    """``(inputs, left_out, dataset)`` of the inputs no file of this machine holds: the
    :class:`~zoo.inference.inputs.Input` s of each object-store URL of ``specs`` and of a
    Ray Dataset's ``path`` column, a :class:`~zoo.inference.inputs.Skipped` for each object
    a URL leaves out, and the dataset (None: none). A dataset is the run's only input."""
    datasets = [spec for spec in specs if is_dataset(spec)]
    if datasets and len(specs) > 1:
        raise OptionsError("a Ray Dataset is detected alone: give it as the only input")
    if datasets:
        return dataset_inputs(datasets[0]), [], datasets[0]
    inputs, left_out = [], []
    for url in specs:
        found, left = list_url(url, recursive)
        inputs += found
        left_out += left
    return inputs, left_out, None


def dataset_inputs(dataset):
    """The :class:`~zoo.inference.inputs.Input` of each row of a Ray Dataset, named by its
    ``path``, in the dataset's order: a pass over the dataset, before the run, so that the
    run knows its photos as it knows a folder's (their count, their output names, those a
    ``--resume`` skips). A dataset lacking :data:`DATASET_COLUMNS`, or naming a photo
    twice, is an OptionsError."""
    columns = getattr(dataset, "columns", None)
    if columns is None:
        raise OptionsError("input %s: not a path, an s3:// URL or a Ray Dataset"
                           % type(dataset).__name__)
    missing = [name for name in DATASET_COLUMNS if name not in (columns() or ())]
    if missing:
        raise OptionsError(
            "the Ray Dataset has no %s column (it has %s): detect one of each photo's file "
            "bytes and name, ray.data.read_binary_files(paths, include_paths=True)"
            % (" and ".join(missing), ", ".join(columns() or ()) or "none"))
    paths = [str(path) for batch in quiet(dataset.select_columns(["path"])).iter_batches(
        batch_size=None, batch_format="numpy") for path in batch["path"]]
    twice = next((path for path, count in collections.Counter(paths).items() if count > 1),
                 None)
    if twice is not None:
        raise OptionsError("the Ray Dataset names %s twice: each photo's path names it in "
                           "the records and --resume" % twice)
    return [Input(path) for path in paths]


def check_cluster(address, workers, worker_cpus):
    """Refuse in one line (:class:`~zoo.errors.OptionsError`) what no cluster runs: an
    ``address`` that is no Ray address, fewer than one worker or CPU."""
    if address is not None and not is_address(address):
        raise OptionsError("--ray %s: not a Ray address (auto, HOST:PORT, ray://HOST:PORT)"
                           % address)
    if min(workers or 1, worker_cpus) < 1:
        raise OptionsError("ray_workers and ray_worker_cpus must be at least 1, got %r and %r"
                           % (workers, worker_cpus))


@dataclass(frozen=True)
class WorkerSettings:
    """What an actor needs to detect as the driver's run would: the detector (checkpoint,
    the driver's resolved epoch, input size, EXIF choice), its threads, its batches, tiles,
    and whether photos are decoded whole (as the driver's source would: ``zoo detect``
    decodes large JPEGs reduced only where it draws no picture, and detections follow), and
    whether the driver needs back the bytes of photos it cannot read (``keep``)."""
    checkpoint: str
    epoch: Optional[int]
    exif: str
    data_shape: Optional[int]
    max_size: Optional[int]
    cpus: int
    data_threads: Optional[int]
    batch_size: Optional[int]
    tiles: object
    threshold: float
    whole: bool
    keep: bool = False  # the driver draws or crops: photos not read from files come back


class DetectWorker:
    """One detector on a Ray actor (Ray Data's ``map_batches``): a batch of ``index`` and
    ``path`` columns (and ``bytes``: each photo's file, from a dataset) in, each picture's
    rows (float64 bytes of the (N, 6) rows), size, error (``""``: none) and ``data`` (the
    photo's bytes where the driver takes them, else ``b""``) out."""

    def __init__(self, settings):
        # The actor's own process, MXNet not loaded yet: its OpenMP threads are the CPUs Ray
        # gives the actor, not those of the node, whose other actors run beside it.
        os.environ["OMP_NUM_THREADS"] = str(settings.cpus)
        self.settings = settings
        self.detector = open_detector(
            settings.checkpoint, settings.epoch, exif=settings.exif,
            data_threads=settings.data_threads or preparing_threads(settings.cpus),
            data_shape=settings.data_shape, max_size=settings.max_size)

    def __call__(self, batch):
        settings, detector = self.settings, self.detector
        paths = [str(path) for path in batch["path"]]
        encoded = (dict(enumerate(batch["bytes"])) if "bytes" in batch
                   else received(paths))
        # kept here until sent back: the source forgets each photo once decoded
        data = [encoded.get(index, b"") if settings.keep else b""
                for index in range(len(paths))]
        source = InputImages([Input(path) for path in paths], exif=settings.exif,
                             decode_for=None if settings.whole else detector.preprocessing,
                             encoded=encoded)
        rows, widths, heights, errors = [], [], [], []
        for index, found, size in detector_outputs(detector.runner, source,
                                                   settings.batch_size, settings.tiles,
                                                   settings.threshold):
            # float64 holds the runner's float32 rows exactly: the driver's records are
            # those this process would write
            rows.append(b"" if found is None else np.asarray(found, np.float64).tobytes())
            widths.append(size[0] if size else 0)
            heights.append(size[1] if size else 0)
            errors.append(source.errors.get(index, ""))
        data = [b"" if error or isinstance(item, DataError) else item
                for item, error in zip(data, errors)]
        return {"index": batch["index"], "rows": np.array(rows, dtype=object),
                "width": np.array(widths), "height": np.array(heights),
                "error": np.array(errors, dtype=object), "data": np.array(data, dtype=object)}


def received(paths):
    """``{position: bytes}`` of the object-store URLs among ``paths``, read at once (a
    DataError where one cannot be); files are read where they are decoded."""
    from concurrent.futures import ThreadPoolExecutor
    urls = [(position, path) for position, path in enumerate(paths) if is_url(path)]
    if not urls:
        return {}

    def fetch(url):
        try:
            return read_url(url)
        except DataError as err:
            return err
    with ThreadPoolExecutor(min(FETCH_THREADS, len(urls))) as pool:
        return dict(zip((position for position, _ in urls),
                        pool.map(fetch, (url for _, url in urls))))


class ClusterInference:
    """What runs the detector of a :class:`zoo.jobs.detect.DetectRun` (as
    :func:`zoo.jobs.detect.local_outputs` does in this process) on the Ray cluster at
    ``address`` (:data:`LOCAL`: one started for the run), ``workers`` actors (None: as many
    as its CPUs hold) of ``worker_cpus`` CPUs each; ``dataset``: the Ray Dataset whose rows
    are the inputs (:func:`dataset_inputs`), else None."""

    def __init__(self, address, workers=None, worker_cpus=1, dataset=None):
        check_cluster(address, workers, worker_cpus)
        self.address, self.workers, self.worker_cpus = address, workers, worker_cpus
        self.dataset = dataset

    @staticmethod
    def check_inputs(inputs):
        """Refuse videos among the :class:`~zoo.inference.inputs.Input` s, before the run
        writes anything: each batch of frames would decode its video from the start."""
        videos = sorted({item.path for item in inputs if item.video_frame is not None})
        if videos:
            raise OptionsError("--ray detects photos, not videos (each batch of frames would "
                               "decode its video from the start): detect %s without --ray"
                               % videos[0])

    def __call__(self, detector, source, options, tiles):
        if not source.inputs:  # a resumed run with every input recorded
            return
        if self.address in (None, LOCAL):
            os.environ.setdefault(*LOOPBACK_ONLY)  # before Ray is imported
        ray = import_ray()
        with ray_session(ray, self.address):
            task = TASK_BATCHES * (options.batch_size or detector.runner.default_batch_size)
            dataset = detected(ray, worker_settings(detector, source, options,
                                                    self.worker_cpus, tiles),
                               photos(ray, source.inputs, self.dataset),
                               pool_size(ray, self.workers, self.worker_cpus,
                                         self.dataset is not None),
                               self.worker_cpus, task)
            try:
                for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
                    yield from picture_outputs(batch, source)
            except ray.exceptions.RayError as err:
                cause = user_error(err)
                if cause is None:
                    raise
                raise DataError("--ray: a Ray worker failed: %s" % cause) from None


def user_error(err):
    """``"Kind: message"`` of the error a worker raised under Ray's ``err`` where it is one a
    user causes: an exception of the zoo's one-line kinds (a ValueError such as
    :class:`~zoo.errors.DataError`, an ImportError such as a package missing on a node, an
    OSError such as a checkpoint a node cannot read); None for anything else (a bug, or Ray's
    own failure), which keeps its traceback. An actor's constructor that failed reaches the
    driver as text only (Ray's ActorDiedError): its last line names the error."""
    from ray.exceptions import RayActorError, RayError
    cause = err
    while isinstance(cause, RayError) and getattr(cause, "cause", None) is not None:
        cause = cause.cause
    if not isinstance(cause, RayError):
        kind, message = type(cause), str(cause)
    elif isinstance(cause, RayActorError) and cause.actor_init_failed:
        last = ([line for line in str(cause).splitlines() if line.strip()] or [""])[-1]
        name, _, message = last.partition(": ")
        kind = getattr(builtins, name, None) or getattr(errors, name, None)
    else:
        return None
    if not (isinstance(kind, type) and issubclass(kind, (ValueError, ImportError, OSError))):
        return None
    return "%s: %s" % (kind.__name__, message)


def worker_settings(detector, source, options, cpus, tiles):
    """The :class:`WorkerSettings` of a run's ``options``, its driver's ``detector`` and
    ``source``, for actors of ``cpus`` CPUs detecting in ``tiles`` (the run's: the
    artifact's unless its flags say otherwise; None: whole pictures only)."""
    return WorkerSettings(
        options.checkpoint, getattr(detector, "epoch", None), detector.exif,
        options.data_shape, options.max_size, cpus, options.data_threads,
        options.batch_size, tiles, options.threshold,
        whole=source.decode_for is None, keep=source.keep)


def picture_outputs(batch, source):
    """``(index, rows, (width, height))`` of each picture of one batch of the actors, as the
    local runner gives them; an unreadable file's error goes to ``source.errors`` (raised,
    if ``source.strict``)."""
    for index, rows, width, height, error, data in zip(
            batch["index"], batch["rows"], batch["width"], batch["height"], batch["error"],
            batch["data"]):
        index = int(index)
        if data:  # a photo this process cannot read, to be drawn or cropped
            source.encoded[index] = data
        if error:
            if source.strict:
                raise DataError(error)
            source.errors[index] = error
            yield index, None, None
        else:
            yield index, np.frombuffer(rows, np.float64).reshape(-1, 6), (int(width),
                                                                          int(height))


def photos(ray, inputs, dataset=None):
    """The Ray dataset of the ``inputs`` to detect, in their order: their ``index`` and
    ``path``, and from a ``dataset`` (whose rows they are) each one's ``bytes``, the rows
    of other paths (those a ``--resume`` skips) left out."""
    if dataset is None:
        return ray.data.from_items([{"index": index, "path": item.path}
                                    for index, item in enumerate(inputs)])
    return quiet(dataset.select_columns(list(DATASET_COLUMNS))).map_batches(
        indexed, fn_kwargs={"wanted": {item.path: index for index, item in enumerate(inputs)}},
        batch_size=None, batch_format="numpy")


def indexed(batch, wanted):
    """The rows of a dataset's ``batch`` whose path is one of ``wanted`` (path: index), with
    that ``index``."""
    paths = [str(path) for path in batch["path"]]
    keep = np.array([path in wanted for path in paths], dtype=bool)
    return {"index": np.array([wanted[path] for path in paths if path in wanted], np.int64),
            "path": batch["path"][keep], "bytes": batch["bytes"][keep]}


def pool_size(ray, workers, cpus, reading):
    """The actors of ``cpus`` CPUs to run: ``workers``, or as many as the cluster's CPUs
    hold, one CPU left free where a dataset is ``reading`` (its read tasks wait for a free
    CPU, which a pool holding them all never gives back): an OptionsError where none is."""
    total = int(ray.cluster_resources().get("CPU", 1))
    free = total - 1 if reading else total
    if reading and (workers or 1) * cpus > free:
        raise OptionsError("--ray: a Ray Dataset is read on a CPU the detectors leave free, "
                           "and %d detector(s) of %d CPU(s) leave none of the cluster's %d; "
                           "run fewer (ray_workers) or on a larger cluster"
                           % (workers or 1, cpus, total))
    return workers or max(1, free // cpus)


def detected(ray, settings, dataset, workers, cpus, task):
    """The Ray dataset of the detections of each photo of ``dataset`` (:func:`photos`), in
    its order: ``task`` photos to a Ray task, on ``workers`` actors of ``cpus`` CPUs."""
    return quiet(dataset.map_batches(DetectWorker, fn_constructor_args=(settings,),
                                     batch_size=task, batch_format="numpy",
                                     compute=ray.data.ActorPoolStrategy(size=workers),
                                     num_cpus=cpus))


def quiet(dataset):
    """``dataset``, its execution keeping the rows' order (records in input order, as zoo
    detect's) and printing nothing (the progress bar is the zoo's)."""
    context = dataset.context
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    context.enable_auto_log_stats = False
    return dataset


def import_ray():
    """The ``ray`` package, Ray Data loaded; :class:`~zoo.errors.MissingPackage` where it is
    not installed."""
    try:
        import ray
        import ray.data  # noqa: F401 (a subpackage Ray does not import itself)
    except ModuleNotFoundError as err:
        raise MissingPackage("--ray needs Ray, which is not installed here (No module named "
                             "%r): pip install -e '.[ray]' in the zoo's checkout" % err.name
                             ) from None
    return ray


@contextlib.contextmanager
def ray_session(ray, address):
    """This process connected to the Ray at ``address`` (:data:`LOCAL`: one started for the
    block, its object store bounded, no dashboard), disconnected after the block; one it is
    connected to already is used as it is. Ray's logs stay in its session folder
    (``/tmp/ray``), not on this terminal, but for errors."""
    if ray.is_initialized():
        yield
        return
    for name in RAY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    started = {} if address not in (None, LOCAL) else {
        "object_store_memory": OBJECT_STORE_BYTES, "include_dashboard": False}
    with kept_signal_handlers():
        ray.init(address=address or LOCAL, log_to_driver=False, logging_level=logging.ERROR,
                 **started)
    try:
        yield
    finally:
        ray.shutdown()


@contextlib.contextmanager
def kept_signal_handlers():
    """The handlers of SIGINT and SIGTERM as they were before the block: ``ray.init`` makes
    SIGTERM exit at once, where the run stops after the pictures being written."""
    if threading.current_thread() is not threading.main_thread():
        yield  # Python sets no handler there, nor does Ray
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)
