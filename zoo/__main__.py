"""Command line: ``python -m zoo check [CONFIG.yaml ...]``."""
import sys

from .check import main as check_main

COMMANDS = {"check": check_main}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print("usage: python -m zoo {%s} [args]" % ",".join(COMMANDS), file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
