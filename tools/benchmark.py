#!/usr/bin/env python
"""``zoo benchmark``, kept as a script so that ``python tools/benchmark.py ...`` works:
see ``zoo benchmark --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark", *sys.argv[1:]]))
