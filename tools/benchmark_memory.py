#!/usr/bin/env python
"""``zoo benchmark-memory``, kept as a script so that ``python tools/benchmark_memory.py ...``
works: see ``zoo benchmark-memory --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-memory", *sys.argv[1:]]))
