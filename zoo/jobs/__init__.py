"""The library's jobs: each a dataclass of typed options and one function that runs it.
The command line (:mod:`zoo.cli`) only turns flags into these options."""

__all__ = ["LOG_FORMAT"]

LOG_FORMAT = "%(asctime)s %(message)s"
"""The format of the jobs' log lines (console and worker log files)."""
