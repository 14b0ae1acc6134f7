#!/usr/bin/env python
"""``zoo detect`` (see its --help), as a script beside the other tools."""
import sys

import zoo.cli  # the zoo first: it sets OMP_NUM_THREADS before MXNet loads

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["detect", *sys.argv[1:]]))
