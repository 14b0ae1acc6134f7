#!/usr/bin/env python
"""``zoo benchmark-detector``, kept as a script so that ``python tools/benchmark_detector.py
...`` works: see ``zoo benchmark-detector --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-detector", *sys.argv[1:]]))
