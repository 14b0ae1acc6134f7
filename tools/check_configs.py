#!/usr/bin/env python
"""Validate every registered model config (or the given YAML files) and print a table."""
import sys

from zoo.check import main

if __name__ == "__main__":
    sys.exit(main())
