"""The one timing helper of every benchmark: wall-clock time on ``time.perf_counter``, the
report line each benchmark prints as soon as a figure is measured, and the line naming the
machine and the settings its figures depend on."""
import os
import platform
import statistics
import time

__all__ = ["Stopwatch", "cpu_model", "environment", "machine_line", "mean_seconds",
           "median_seconds", "print_line", "seconds"]


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


def cpu_model():
    """The processor's name as /proc/cpuinfo gives it, else the platform's word for it."""
    try:
        with open("/proc/cpuinfo") as stream:
            for line in stream:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown processor"


def machine_line(*settings):
    """``machine: N cores (CPU), load average L; SETTING; ...``: what a benchmark's figures
    are to be read with (its ratios compare only with runs on the same line)."""
    return "; ".join(["machine: %d cores (%s), load average %.2f"
                      % (len(os.sched_getaffinity(0)), cpu_model(), os.getloadavg()[0])]
                     + list(settings))


def environment(*names):
    """``NAME=value`` of each environment variable (``None`` where unset), comma-separated."""
    return ", ".join("%s=%s" % (name, os.environ.get(name)) for name in names)
