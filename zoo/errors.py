"""Exceptions raised by the zoo."""
import reprlib

# How much of a value an error quotes: a config value may be huge (a YAML alias expands to
# millions of items), and repr of it all would exhaust memory before the message is shown.
_QUOTE = reprlib.Repr()
_QUOTE.maxlevel = 4
_QUOTE.maxlist = _QUOTE.maxtuple = _QUOTE.maxdict = _QUOTE.maxset = 16
_QUOTE.maxstring = _QUOTE.maxother = 120
QUOTE_LIMIT = 160


def _cut(text):
    """A name (a model's, a field's) at most :data:`QUOTE_LIMIT` characters long: a YAML
    key can be any length."""
    text = str(text)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT - 3] + "..."


def quoted(value):
    """``repr(value)`` bounded in depth, items and length (``...`` marks the cuts)."""
    text = _QUOTE.repr(value)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT - 3] + "..."

__all__ = ["ConfigError", "DataError", "HealthWarning", "Interrupted", "MissingPackage",
           "OnnxModelError", "OptionsError", "OutputLocked", "PretrainedNotFound"]


class ConfigError(ValueError):
    """A model configuration is invalid; the message is one line naming model, field and value."""

    def __init__(self, model, field, value, expected):
        self.model, self.field, self.value, self.expected = model, field, value, expected
        super().__init__("%s: %s = %s: %s" % (_cut(model), _cut(field), quoted(value),
                                                expected))


class PretrainedNotFound(FileNotFoundError):
    """A pretrained parameter file is not where the zoo looks for it."""


class DataError(ValueError):
    """A dataset file is missing or malformed; the message is one line naming the file
    (and line, where there is one) and what is wrong. ``skippable``: whether ``skip_bad``
    (``--skip-bad``) would have skipped the image instead of stopping; ``skip_hint``: whether
    the command line then says so (not where the message names a better way out)."""

    skippable = False
    skip_hint = True


class OptionsError(ValueError):
    """A job's options are out of range or contradict each other; the message is one line
    naming them."""


class OnnxModelError(ValueError):
    """A deployed file (an ONNX export, an OpenVINO IR) is missing, damaged or not a zoo
    export this zoo reads; the message is one line naming the file. Raised by
    :mod:`zoo.onnx.runtime` and :mod:`zoo.onnx.openvino_runtime` (which load no MXNet)."""


class MissingPackage(ImportError):
    """A package what was asked needs is not installed here (MXNet to train, ONNX Runtime for
    a ``.onnx`` file, OpenVINO for a ``.xml`` one); the message is one line naming it and
    how to install it."""


class OutputLocked(RuntimeError):
    """Another process is writing the same output (:mod:`zoo.runlock`); the message is one
    line naming it."""


class Interrupted(RuntimeError):
    """SIGINT or SIGTERM stopped a job at a safe point, what it finished kept; the message is
    one line saying what is where. ``exit_status`` is the shell's status of a command killed
    by that signal (130, 143)."""

    def __init__(self, signum, message):
        super().__init__(message)
        self.signum, self.exit_status = signum, 128 + signum


class HealthWarning(UserWarning):
    """A training-health check found something wrong with the run (:mod:`zoo.engine.health`);
    the message is one line: the check, what was measured against what, and a way out."""
