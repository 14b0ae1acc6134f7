"""Serve a detector over HTTP (``zoo serve``): a Ray Serve deployment around the zoo's own
detector (:func:`zoo.open_detector`: an artifact, or a deployed ``.onnx`` or ``.xml`` file),
answering ``POST /detect`` with the record ``zoo detect`` writes for a photo, in the
foreground until SIGINT or SIGTERM (:func:`serve`). The deployment itself, its routes and
its page are :mod:`zoo.ray.serve`; Ray is imported only when a server starts, so this
module and ``zoo serve --help`` load no Ray.
"""
import importlib.util
import signal
import threading
from dataclasses import dataclass
from typing import Optional

from zoo.errors import MissingPackage, OptionsError
from zoo.flags import (data_threads_flag, epoch_flag, exif_flag, field_of, flag, float_in,
                       options_from, positive_int)
from zoo.jobs.detect import DetectOptions
from zoo.signals import stop_signals

__all__ = ["MAX_REQUEST_BYTES", "ServeOptions", "serve"]

MAX_REQUEST_BYTES = 50 << 20
"""The largest request body taken by default: room for a JPEG photo near the 100 megapixels
``zoo detect`` takes (``$ZOO_MAX_PIXELS``), some tens of MB."""
MIN_OBJECT_STORE_MB = 75
"""The least object store Ray starts with."""
RAY_PACKAGES = ("ray", "fastapi")
"""What a server needs beyond the zoo: the ``ray`` extra (``ray[serve]`` brings FastAPI)."""


@dataclass(frozen=True)
class ServeOptions:
    """What ``zoo serve`` serves and how: each field declares its flag (:mod:`zoo.flags`),
    but the checkpoint, which is the command's positional word."""
    checkpoint: str                          # artifact prefix, .onnx or .xml
    epoch: Optional[int] = epoch_flag()      # None: the best validated epoch, else the newest
    host: str = flag("127.0.0.1", "address to listen on (0.0.0.0: every interface, reachable "
                                  "from other machines)", metavar="ADDRESS")
    port: int = flag(8000, "HTTP port", type=positive_int)
    replicas: int = flag(1, "detector processes answering requests (each its own copy of "
                            "the detector and its share of the cores)", type=positive_int)
    max_batch_size: Optional[int] = flag(  # None: the detector's default batch size
        None, "most requests one batch runs (default: the images a batch of the network's "
              "input holds, as zoo detect batches them: 8 for a small SSD, 1 for a Faster "
              "R-CNN at 600x1000)", type=positive_int, metavar="N")
    batch_wait: float = flag(0.01, "seconds a request waits for others to fill its batch",
                             type=float_in(0.0, 10.0), metavar="SECONDS")
    batching: bool = flag(True, "run each request alone, as it comes (no dynamic batching)")
    max_bytes: int = flag(MAX_REQUEST_BYTES, "largest request body, in bytes (larger: 413); "
                                             "pixels are bounded as zoo detect bounds them "
                                             "($ZOO_MAX_PIXELS)", type=positive_int)
    threshold: float = field_of(DetectOptions, "threshold")
    max_detections: int = field_of(DetectOptions, "max_detections")
    exif: str = exif_flag()
    data_threads: Optional[int] = data_threads_flag()
    data_shape: Optional[int] = field_of(DetectOptions, "data_shape")
    max_size: Optional[int] = field_of(DetectOptions, "max_size")
    object_store_mb: int = flag(128, "Ray's object store, in MB (at least %d)"
                                % MIN_OBJECT_STORE_MB, type=positive_int, metavar="MB")

    def __post_init__(self):
        if not 1 <= self.port <= 65535:
            raise OptionsError("port must be in [1, 65535], got %r" % self.port)
        if min(self.replicas, self.max_batch_size or 1, self.max_bytes,
               self.max_detections) < 1:
            raise OptionsError("replicas, max_batch_size, max_bytes and max_detections must be "
                               "at least 1, got %r, %r, %r and %r" % (
                                   self.replicas, self.max_batch_size, self.max_bytes,
                                   self.max_detections))
        if not 0.0 <= self.batch_wait <= 10.0:
            raise OptionsError("batch_wait must be in [0, 10] seconds, got %r" % self.batch_wait)
        if not 0.0 <= self.threshold <= 1.0:
            raise OptionsError("threshold must be in [0, 1], got %r" % self.threshold)
        if self.object_store_mb < MIN_OBJECT_STORE_MB:
            raise OptionsError("object_store_mb must be at least %d (Ray's least), got %r"
                               % (MIN_OBJECT_STORE_MB, self.object_store_mb))

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo serve``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


def check_ray_installed():
    """MissingPackage, in one line, where the ``ray`` extra is not installed."""
    missing = [name for name in RAY_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingPackage("zoo serve runs on Ray Serve, and %s is not installed here: "
                             "pip install 'mxnet-detection-zoo[ray]' (pip install -e '.[ray]' "
                             "in the zoo's checkout)" % " and ".join(missing))


def serve(options, on_ready=print):
    """Serve ``options.checkpoint`` (a :class:`ServeOptions`) until SIGINT or SIGTERM, then
    shut Serve and Ray down; returns the signal's name (``"SIGINT"``). ``on_ready(line)`` is
    given the line naming the server's address once it answers."""
    check_ray_installed()
    from zoo.ray.serve import start  # Ray's: loaded only to serve
    stopped = threading.Event()
    signals = []

    def on_signal(signum):
        signals.append(signum)
        stopped.set()
    # Ray routes SIGTERM to its own handler as it starts, and start() shuts down what it
    # started when a signal stops it: the zoo's handlers come after.
    server = start(options)
    with stop_signals(on_signal):
        try:
            on_ready("serving %s at %s (POST /detect, GET /health, /model, /docs); Ctrl-C "
                     "stops" % (options.checkpoint, server.url))
            while not stopped.wait(0.5):
                pass
        finally:
            server.stop()  # a second signal meanwhile waits for it
    return signal.Signals(signals[0]).name
