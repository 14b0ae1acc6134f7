#!/usr/bin/env python
"""``zoo benchmark-tiles``, kept as a script so that ``python tools/benchmark_tiles.py
...`` works: see ``zoo benchmark-tiles --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-tiles", *sys.argv[1:]]))
