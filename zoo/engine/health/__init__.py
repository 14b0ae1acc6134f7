"""Training health: checks that run with every training run (hooks of
:class:`zoo.engine.trainer.Trainer`, no second loop) and say, in one line each, when the
run is not learning what it should.

Every check reports into the run's :class:`~zoo.engine.health.report.HealthReport`
(``trainer.health``): a result per check and the warnings it issued.
:class:`~zoo.engine.health.summary.HealthSummary` logs the health line at the end and writes
it beside the checkpoints (``<prefix>-health.json``); the checkpoints' metadata carry it too
(``training.health``).

This package's ``__init__`` imports nothing: the trainer imports the report, and the checks
import the trainer's hooks.
"""
