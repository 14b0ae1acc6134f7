"""The files a training run writes beside its artifact prefix that more than one part of
the zoo reads: its CSV log and its health record. Loads nothing, so that ``zoo plot-log``
finds them without MXNet."""

__all__ = ["LOG_SUFFIX", "health_path", "log_path"]

LOG_SUFFIX = "-log.csv"


def log_path(prefix):
    """Where a run at artifact ``prefix`` writes its CSV log, a row per epoch."""
    return prefix + LOG_SUFFIX


def health_path(prefix):
    """Where a run at artifact ``prefix`` writes its health record."""
    return prefix + "-health.json"
