#!/usr/bin/env python
"""``zoo prepare-data`` (see its --help), kept as a script so that existing commands still work."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["prepare-data", *sys.argv[1:]]))
