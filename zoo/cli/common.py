"""What every command's parser shares: its one-line usage errors, its help format, hidden
aliases of old flag names. A command's options declare their flags on their fields
(:mod:`zoo.flags`, which also holds the options several commands share and the argparse types
that check values while the command line is parsed)."""
import argparse

__all__ = ["HelpFormatter", "Parser", "add_hidden_alias"]


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


def add_hidden_alias(parser, flag, dest, type=None):
    """An old flag name kept working for ``dest`` without showing in --help."""
    parser.add_argument(flag, dest=dest, type=type, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
