"""The benchmarks behind ``zoo benchmark*``: inference speed (:mod:`zoo_bench.inference`),
the data pipeline, :class:`zoo.Detector`, memory saving and calibration, the per-part
profile and FLOPs counting, all timed by one helper (:mod:`zoo_bench.timing`); their
command-line modules in :mod:`zoo_bench.cli`. They import the zoo; the zoo imports none of
them, and they are not installed with it: they run from the zoo's source checkout."""
import os

__all__ = ["child_environment"]


def child_environment(**variables):
    """This process's environment with ``variables`` set, for a child process that runs a
    module of this package with ``python -m``: its PYTHONPATH starts with the folder holding
    this package (and the zoo, in a checkout), which Python would not find from another
    working folder."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (parent, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **variables)
