#!/usr/bin/env python
"""``zoo benchmark-photos``, kept as a script so that ``python tools/benchmark_photos.py
...`` works: see ``zoo benchmark-photos --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-photos", *sys.argv[1:]]))
