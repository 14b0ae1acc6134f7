#!/usr/bin/env python
"""``zoo benchmark-calibration`` (see its --help), as a script like the other benchmarks."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["benchmark-calibration", *sys.argv[1:]]))
