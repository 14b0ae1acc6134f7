#!/usr/bin/env python
"""``zoo launch``, kept as a script so that ``python tools/launch.py ...`` works:
see ``zoo launch --help``."""
import sys

import zoo.cli  # the zoo first: it sets OMP_NUM_THREADS before MXNet loads

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["launch", *sys.argv[1:]]))
