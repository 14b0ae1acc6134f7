"""The one timing helper of every benchmark: wall-clock time on ``time.perf_counter``, and the
report line each benchmark prints as soon as a figure is measured."""
import statistics
import time

__all__ = ["Stopwatch", "mean_seconds", "median_seconds", "print_line", "seconds"]


class Stopwatch:
    """Seconds since it was made (or :meth:`restart` ed), called as ``watch()``."""

    def __init__(self):
        self.restart()

    def restart(self):
        self.start = time.perf_counter()

    def __call__(self):
        return time.perf_counter() - self.start


def seconds(function):
    """Wall-clock seconds one call of ``function`` takes."""
    watch = Stopwatch()
    function()
    return watch()


def median_seconds(run, runs, warmup=0):
    """Median seconds of ``runs`` calls of ``run`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        run()
    return statistics.median(seconds(run) for _ in range(runs))


def mean_seconds(run, runs):
    """Mean seconds of ``runs`` calls of ``run``, timed together."""
    return seconds(lambda: [run() for _ in range(runs)]) / runs


def print_line(line):
    """The benchmarks' default report: each line on stdout as soon as it is measured."""
    print(line, flush=True)
