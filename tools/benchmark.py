#!/usr/bin/env python
"""``zoo benchmark``, kept as a script so that ``python tools/benchmark.py ...`` works:
see ``zoo benchmark --help``."""
import sys

import zoo.cli  # the zoo first: it sets OMP_NUM_THREADS before MXNet loads

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark", *sys.argv[1:]]))
