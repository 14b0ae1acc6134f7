"""The library's jobs: each a dataclass of typed options and one function that runs it.
The command line (:mod:`zoo.cli`) only turns flags into these options."""
from zoo import process

# A script's own "from zoo.jobs.train import train" runs as fast as the command line: the
# settings are MXNet's to read when it loads, which the job's modules make it do.
process.use_fast_settings()

__all__ = ["LOG_FORMAT"]

LOG_FORMAT = "%(asctime)s %(message)s"
"""The format of the jobs' log lines (console and worker log files)."""
