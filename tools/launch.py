#!/usr/bin/env python
"""``zoo launch``, kept as a script so that ``python tools/launch.py ...`` works:
see ``zoo launch --help``."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["launch", *sys.argv[1:]]))
