"""Exceptions raised by the zoo."""

__all__ = ["ConfigError", "DataError", "OptionsError", "PretrainedNotFound"]


class ConfigError(ValueError):
    """A model configuration is invalid; the message is one line naming model, field and value."""

    def __init__(self, model, field, value, expected):
        self.model, self.field, self.value, self.expected = model, field, value, expected
        super().__init__("%s: %s = %r: %s" % (model, field, value, expected))


class PretrainedNotFound(FileNotFoundError):
    """A pretrained parameter file is not where the zoo looks for it."""


class DataError(ValueError):
    """A dataset file is missing or malformed; the message is one line naming the file
    (and line, where there is one) and what is wrong."""


class OptionsError(ValueError):
    """A job's options are out of range or contradict each other; the message is one line
    naming them."""
