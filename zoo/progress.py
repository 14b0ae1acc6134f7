"""Progress bars: tqdm's where it is installed; without it (a deployment's environment,
``requirements-deploy.txt``), a plain count on a terminal and nothing elsewhere, so that no
job needs tqdm to run."""
import sys
import time

__all__ = ["NoBar", "PlainBar", "progress_bar"]

REFRESH_SECONDS = 0.5
"""How often the plain bar rewrites its line."""


def progress_bar(iterable=None, **options):
    """A progress bar over ``iterable`` (or one updated by hand), taking tqdm's ``total``,
    ``initial``, ``desc``, ``unit`` and ``leave``: tqdm's own where it can be imported, else a
    :class:`PlainBar`."""
    try:
        from tqdm import tqdm
    except ImportError:
        return PlainBar(iterable, **options)
    return tqdm(iterable, **options)


class PlainBar:
    """``DESC: N/TOTAL UNIT [postfix]`` rewritten in place on stderr where it is a terminal
    (at most every :data:`REFRESH_SECONDS`), nothing where it is not; the calls of tqdm the
    zoo makes (``update``, ``set_postfix``, ``close``, iteration)."""

    def __init__(self, iterable=None, total=None, desc=None, unit="it", leave=True,
                 stream=None, initial=0):
        self.iterable, self.total, self.desc, self.unit, self.leave = (iterable, total, desc,
                                                                      unit, leave)
        self.stream = stream or sys.stderr
        self.count, self.postfix, self.last = initial, "", 0.0
        self.live = getattr(self.stream, "isatty", lambda: False)()

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def update(self, count=1):
        self.count += count
        if self.live and time.monotonic() - self.last >= REFRESH_SECONDS:
            self._show()

    def set_postfix(self, values=None, refresh=True, **more):
        values = dict(values or {}, **more)
        self.postfix = ", ".join("%s=%s" % item for item in values.items())

    def close(self):
        if self.live and self.count:
            self._show()
            self.stream.write("\n" if self.leave else "\r\033[K")
            self.stream.flush()
            self.live = False

    def _show(self):
        done = "%d/%d" % (self.count, self.total) if self.total else "%d" % self.count
        line = "%s%s %s%s" % (self.desc + ": " if self.desc else "", done, self.unit,
                              " [%s]" % self.postfix if self.postfix else "")
        self.stream.write("\r\033[K" + line)
        self.stream.flush()
        self.last = time.monotonic()


class NoBar:
    """The bar of a job run with ``--no-progress``: shows nothing."""

    def update(self, count=1):
        pass

    def close(self):
        pass
