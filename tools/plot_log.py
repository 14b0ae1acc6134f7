#!/usr/bin/env python
"""Plot the loss and validation mAP curves of a per-epoch training CSV log into a PNG."""
import argparse
import os
import sys

from zoo.visualize import plot_training_log


def main(argv=None):
    """Parse the arguments, write the PNG and print its path; errors exit with status 2."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("csv", help="per-epoch training log (columns epoch, *_loss, val_map, ...)")
    parser.add_argument("--output", help="PNG to write (default: the CSV path with .png)")
    args = parser.parse_args(argv)
    output = args.output or os.path.splitext(args.csv)[0] + ".png"
    try:
        plot_training_log(args.csv, output)
    except (OSError, ValueError) as err:
        parser.error(str(err))
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
