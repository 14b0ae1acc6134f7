#!/usr/bin/env python
"""Pack a VOC or COCO dataset into MXNet PREFIX.lst, PREFIX.rec and PREFIX.idx."""
import sys

from zoo.data.prepare import main

if __name__ == "__main__":
    sys.exit(main())
