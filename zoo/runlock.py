"""One writer per output: an advisory lock (``fcntl.flock``) on a lock file beside what a
command writes, held while it writes.

A second command into a busy output fails at once with :class:`zoo.errors.OutputLocked`,
one line naming the holder (pid, host, command, start time, which the holder records in the
lock file). The kernel drops a flock when its process ends however it ends, so a crashed
holder's lock is ignored without any staleness guess. The holder removes the file when it
is done.
"""
import contextlib
import datetime
import fcntl
import json
import os
import socket
import sys

from zoo.errors import OutputLocked

__all__ = ["hold", "lock_path", "train_lock_path"]

_ATTEMPTS = 5


def lock_path(prefix):
    """The lock file of an output prefix: ``PREFIX.lock``."""
    return prefix + ".lock"


def train_lock_path(output_dir):
    """The lock file of a training's output folder (a run writes several prefixes' files and
    the log there): ``<output_dir>/train.lock``."""
    return os.path.join(output_dir, "train.lock")


@contextlib.contextmanager
def hold(path, what):
    """Hold the lock file ``path`` for the ``with`` block; ``what`` names the output in the
    error (e.g. ``output folder out/train``). Raises :class:`OutputLocked` at once if another
    process holds it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = _acquire(path, what)
    try:
        _record(fd)
        yield path
    finally:
        # Removed while still held: a process that opened the old file then finds it gone.
        with contextlib.suppress(OSError):
            os.remove(path)
        os.close(fd)


def _acquire(path, what):
    """The descriptor of ``path`` locked by this process. A holder removes its file on
    release, so a lock won on a file no longer at ``path`` is retried."""
    for _ in range(_ATTEMPTS):
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise OutputLocked("%s is in use by %s; one writer at a time: wait for it to end "
                               "or write elsewhere (lock file %s)" % (what, holder, path)) \
                from None
        if _still_at(fd, path):
            return fd
        os.close(fd)
    raise OutputLocked("%s: lock file %s keeps being replaced; another process is starting "
                       "and stopping there" % (what, path))


def _open(path):
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise OutputLocked("%s: cannot create the lock file (%s)" % (
            path, err.strerror or err)) from None


def _still_at(fd, path):
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _record(fd):
    """Write who holds the lock, for the error a second process prints."""
    record = {"pid": os.getpid(), "host": socket.gethostname(),
              "command": _command()[:200],
              "started": datetime.datetime.now().isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)


def _command():
    """This process's command line, ``zoo ...`` for the CLI however it was started."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    if program in ("zoo", "__main__.py"):
        program = "zoo"
    return " ".join([program] + sys.argv[1:])


def _holder(fd):
    """``pid 123 on host (zoo train ..., since ...)`` from the lock file, or what is known."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode())
        return "pid %d on %s (%s, since %s)" % (record["pid"], record["host"],
                                                record["command"], record["started"])
    except (ValueError, KeyError, TypeError, OSError):
        # The holder has not written its record yet.
        return "another process"
