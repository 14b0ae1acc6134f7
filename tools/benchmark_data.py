#!/usr/bin/env python
"""``zoo benchmark-data``, kept as a script so that ``python tools/benchmark_data.py ...`` works:
see ``zoo benchmark-data --help``."""
import sys

import zoo.cli  # the zoo first: it sets OMP_NUM_THREADS before MXNet loads

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-data", *sys.argv[1:]]))
