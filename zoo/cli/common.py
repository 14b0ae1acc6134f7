"""What every command's parser shares: its one-line usage errors, its help format, hidden
aliases of old flag names. A command's options declare their flags on their fields
(:mod:`zoo.flags`, which also holds the options several commands share and the argparse types
that check values while the command line is parsed); the ``add_*_flag(s)`` helpers here add
shared flags to the parsers of commands whose options class does not declare them yet
(``zoo detect``'s)."""
import argparse

# The value types live beside the options' flags (zoo.flags); zoo detect takes these from here
# with the rest.
from zoo.flags import (add_shared_flag, checkpoint_flag, comma_list, data_shape_flag,
                       data_threads_flag, epoch_flag, exif_flag, float_in, max_size_flag,
                       positive_int, progress_flag)

__all__ = ["HelpFormatter", "Parser", "add_checkpoint_flags", "add_data_threads_flag",
           "add_exif_flag", "add_hidden_alias", "add_input_size_flags", "add_progress_flag",
           "comma_list", "float_in", "positive_int"]


class Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one line, ``zoo COMMAND: error: ...`` naming the
    flag (``--help`` shows the usage), exit status 2."""

    def error(self, message):
        self.exit(2, "%s: error: %s\n" % (self.prog, " ".join(message.split())))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter,
                    argparse.RawDescriptionHelpFormatter):
    """Keeps the description's examples as written and shows each flag's true default,
    except where there is none to show (None, empty, or an on/off switch) and the help text
    says what happens instead."""

    def _get_help_string(self, action):
        if action.default in (None, "", (), []) or isinstance(action.const, bool):
            return action.help
        return super()._get_help_string(action)


def add_checkpoint_flags(parser, what, epoch=None):
    """``--checkpoint`` (``what`` it names) and ``--epoch`` (default ``epoch``)."""
    add_shared_flag(parser, "checkpoint", checkpoint_flag(what))
    add_shared_flag(parser, "epoch", epoch_flag(), epoch)


def add_data_threads_flag(parser, default):
    add_shared_flag(parser, "data_threads", data_threads_flag(default))


def add_input_size_flags(parser, options, max_size=False, of_network=False,
                         of_checkpoint=False):
    """``--data-shape`` and, with ``max_size``, ``--max-size``, their defaults the fields of
    the same names of ``options`` (:func:`zoo.flags.data_shape_flag`)."""
    add_shared_flag(parser, "data_shape", data_shape_flag(options.data_shape, max_size,
                                                          of_network, of_checkpoint))
    if max_size:
        add_shared_flag(parser, "max_size",
                        max_size_flag(options.max_size, of_network, of_checkpoint))


def add_exif_flag(parser, default):
    add_shared_flag(parser, "exif", exif_flag(), default)


def add_progress_flag(parser):
    add_shared_flag(parser, "progress", progress_flag())


def add_hidden_alias(parser, flag, dest, type=None):
    """An old flag name kept working for ``dest`` without showing in --help."""
    parser.add_argument(flag, dest=dest, type=type, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
