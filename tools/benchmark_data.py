#!/usr/bin/env python
"""``zoo benchmark-data``, kept as a script so that ``python tools/benchmark_data.py ...`` works:
see ``zoo benchmark-data --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-data", *sys.argv[1:]]))
