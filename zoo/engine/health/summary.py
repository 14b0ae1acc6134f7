"""The health line at the end of a run, and the health record beside its checkpoints."""
import json
import logging
import os

from zoo.atomicfile import write_text
from zoo.engine.hooks import Hook
from zoo.runfiles import health_path

__all__ = ["HealthSummary"]

LOG = logging.getLogger("zoo.train")


class HealthSummary(Hook):
    """Logs the health line once training ends and writes the record to
    ``<prefix>-health.json`` (rewritten after every epoch, so a stopped run keeps what its
    checks found)."""
    only_rank0 = True

    def __init__(self, prefix):
        self.prefix = prefix

    def after_epoch(self, trainer, epoch, row):
        self._write(trainer)

    def after_train(self, trainer):
        LOG.info("%s", trainer.health.line())
        self._write(trainer)

    def _write(self, trainer):
        path = health_path(self.prefix)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_text(path, json.dumps(trainer.health.record(), indent=1))
