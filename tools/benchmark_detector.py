#!/usr/bin/env python
"""``zoo benchmark-detector``, kept as a script so that ``python tools/benchmark_detector.py
...`` works: see ``zoo benchmark-detector --help``."""
import sys

import zoo.cli  # the zoo first: it sets OMP_NUM_THREADS before MXNet loads

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-detector", *sys.argv[1:]]))
