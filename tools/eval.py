#!/usr/bin/env python
"""``zoo eval`` (see its --help), kept as a script so that existing commands still work."""
import sys

import zoo.cli  # the zoo first: it sets OMP_NUM_THREADS before MXNet loads

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["eval", *sys.argv[1:]]))
