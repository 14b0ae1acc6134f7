#!/usr/bin/env python
"""``zoo import-gluoncv`` (see its --help), as a script like the other tools."""
import sys

import zoo.cli  # its main() chooses MXNet's settings before anything loads MXNet

if __name__ == "__main__":
    sys.exit(zoo.cli.main(["import-gluoncv", *sys.argv[1:]]))
