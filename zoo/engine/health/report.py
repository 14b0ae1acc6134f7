"""The run's health record: each check's result, every warning issued, the pictures
written; the health line at the end of a run and its JSON file."""
import warnings

from zoo.errors import HealthWarning

__all__ = ["HealthReport", "HealthWarning"]

STATUSES = ("ok", "warning", "off", "not run")


class HealthReport:
    """What the health checks of one run found.

    ``result(check, status, detail)`` records a check's outcome (``"ok"``, ``"warning"``,
    ``"off"``, ``"not run"``) with a short detail (``"1.31x the trivial loss"``);
    ``warn(check, message)`` issues one :class:`HealthWarning` (shown by the command line
    as ``zoo train: warning: CHECK: MESSAGE``), records it with the epoch it came at, and
    marks the check ``"warning"``; ``picture(path)`` lists a picture written for the user.
    """

    def __init__(self):
        self.checks = {}      # check -> {"status", "detail"}, in the order first reported
        self.warnings = []    # {"check", "epoch", "message"}
        self.pictures = []
        # The loss of the trivial predictor on the run's first batch, once the initial-loss
        # check measured it: the yardstick of spikes and of the divergence check.
        self.trivial_loss = None

    def result(self, check, status, detail=""):
        if status not in STATUSES:
            raise ValueError("health status %r: one of %s" % (status, ", ".join(STATUSES)))
        previous = self.checks.get(check)
        # A warning stays a warning: a later "ok" of the same check does not hide it.
        if previous and previous["status"] == "warning" and status == "ok":
            return
        self.checks[check] = {"status": status, "detail": detail}

    def warn(self, check, message, epoch=None):
        """Issue and record one warning; ``message`` says what was measured against what
        and names a way out. ``epoch`` counts from 1 (None: before training)."""
        self.warnings.append({"check": check, "epoch": epoch, "message": message})
        self.result(check, "warning", message if check not in self.checks
                    else self.checks[check]["detail"] or message)
        warnings.warn(HealthWarning("%s: %s" % (check, message)), stacklevel=2)

    def picture(self, path):
        if path not in self.pictures:
            self.pictures.append(path)

    def line(self):
        """``health: census ok; first batch ok; ... ; 2 warnings (spike, plateau);
        pictures: out/train_batch0.png``."""
        parts = ["%s %s%s" % (check, entry["status"],
                             " (%s)" % entry["detail"] if entry["detail"]
                             and entry["status"] != "warning" else "")
                 for check, entry in self.checks.items()]
        count = len(self.warnings)
        checks = sorted({w["check"] for w in self.warnings})
        parts.append("%d warning%s%s" % (count, "" if count == 1 else "s",
                                         " (%s)" % ", ".join(checks) if checks else ""))
        if self.pictures:
            parts.append("pictures: " + ", ".join(self.pictures))
        return "health: " + "; ".join(parts)

    def record(self):
        """The JSON-able record (the health file's and the checkpoint metadata's)."""
        return {"checks": {k: dict(v) for k, v in self.checks.items()},
                "warnings": [dict(w) for w in self.warnings],
                "pictures": list(self.pictures)}
