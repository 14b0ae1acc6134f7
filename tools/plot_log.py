#!/usr/bin/env python
"""``zoo plot-log``, kept as a script so that ``python tools/plot_log.py ...`` works:
see ``zoo plot-log --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["plot-log", *sys.argv[1:]]))
