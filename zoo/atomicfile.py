"""Files written whole or not at all: the one writer every part of the zoo writes its
files through (artifacts, results, pictures, health records).

A file is written to ``PATH.tmp-PID-N`` beside it, then renamed over ``PATH``, so a reader
never sees half a file and ``PATH`` keeps its old contents until the new ones are complete.
Whatever stops the write (a full disk, a folder that refuses, Ctrl-C, a signal handler's
exception, an error in the caller's writer) removes the temporary file before the error
goes on: nothing is left beside ``PATH``. Only a process killed outright (SIGKILL, power
loss) can leave one, named with its pid (:func:`zoo.artifact.clean_temporary_files`).

Loads nothing but the standard library, so that every module, MXNet-free deployments'
included, can write through it without an import cycle.
"""
import itertools
import os

__all__ = ["TEMPORARY_MARK", "atomic_write", "bytes_writer", "remove_quietly", "write_bytes",
           "write_text"]

TEMPORARY_MARK = ".tmp-"
"""What a temporary file's name holds after the name of the file it becomes."""
_NUMBERS = itertools.count()
"""Numbers the temporary files of this process: two threads writing one path never share
one (``next`` on a count is atomic in CPython)."""


def temporary_path(path):
    """``PATH.tmp-PID-N``: the pid tells a killed writer's leftover from a running one's."""
    return "%s%s%d-%d" % (path, TEMPORARY_MARK, os.getpid(), next(_NUMBERS))


def atomic_write(path, write, durable=True):
    """Call ``write(temporary_path)``, then rename the file it wrote to ``path``;
    ``durable``: flush it to disk first (fsync), so that ``path`` survives a power loss
    with its new contents whole. Any exception (``OSError``, ``KeyboardInterrupt``, the
    writer's own) removes the temporary file and propagates; ``path`` is then as it was.
    An ``OSError`` is raised again naming ``path``: a full disk's names no file, a refused
    ``open`` the temporary one, which means nothing to the user."""
    temporary = temporary_path(path)
    try:
        write(temporary)
        if durable:
            with open(temporary, "rb") as stream:
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException as err:
        remove_quietly(temporary)
        if isinstance(err, OSError) and err.errno is not None:
            raise OSError(err.errno, err.strerror, path) from err  # its subclass, by errno
        raise


def bytes_writer(data):
    """The ``write`` of :func:`atomic_write` that writes ``data`` (bytes)."""
    def write(temporary):
        with open(temporary, "wb") as stream:
            stream.write(data)
    return write


def write_bytes(path, data, durable=True):
    """Write ``data`` (bytes) to ``path`` atomically (:func:`atomic_write`)."""
    atomic_write(path, bytes_writer(data), durable)


def write_text(path, text, durable=True):
    """Write ``text`` to ``path`` atomically, UTF-8 encoded (:func:`atomic_write`)."""
    write_bytes(path, text.encode("utf-8"), durable)


def remove_quietly(path):
    """Remove ``path`` if it is there; an error doing so is ignored: cleaning up after a
    failure must not hide the error that stopped the write (the file may never have been
    made, or the folder refuses that too)."""
    try:
        os.remove(path)
    except OSError:
        pass
