#!/usr/bin/env python
"""``zoo benchmark-train``, kept as a script so that ``python tools/benchmark_train.py ...``
works: see ``zoo benchmark-train --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-train", *sys.argv[1:]]))
