#!/usr/bin/env python
"""``zoo detect`` (see its --help), as a script beside the other tools."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["detect", *sys.argv[1:]]))
