#!/usr/bin/env python
"""``zoo benchmark-decode``, kept as a script so that ``python tools/benchmark_decode.py
...`` works: see ``zoo benchmark-decode --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-decode", *sys.argv[1:]]))
