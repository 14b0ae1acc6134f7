"""SIGINT and SIGTERM as a request to stop at the next safe point (a training's batch
boundary, ``zoo detect``'s next image), so that what is finished is kept; loads no MXNet."""
import contextlib
import signal
import threading

__all__ = ["STOP_SIGNALS", "stop_signals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_signals(handler):
    """Route SIGINT and SIGTERM to ``handler(signum)`` in the block, then restore the
    previous handlers. Outside the main thread (where Python cannot set handlers) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, lambda number, frame: handler(number))
                for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
