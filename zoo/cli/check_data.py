"""``zoo check-data``: the data census of a dataset's training and validation splits, and
pictures of the first batches the network would get, as ``zoo train`` with the same flags
would start (the same refusals and warnings), without training. Exit status 1 where
training would refuse the data, else 0.

Example, a VOC folder being prepared, drawn as ssd_mobilenetv2 would get it:
    zoo check-data --network ssd_mobilenetv2 --dataset voc --data-root my_data \\
        --data-shape 256 --batch-size 8 --output-dir output/check
"""
from zoo.cli.train import add_data_arguments
from zoo.flags import add_flags
from zoo.jobs.check_data import CheckDataOptions, check_data

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, CheckDataOptions, "network")
    add_data_arguments(p, CheckDataOptions)
    add_flags(p, CheckDataOptions, "output_dir", "batches")


def run(args):
    result = check_data(CheckDataOptions.from_flags(args))
    for line in result.lines:
        print(line)
    for path in result.pictures:
        print("picture: %s" % path)
    print("%d warning%s" % (len(result.warnings), "" if len(result.warnings) == 1 else "s"))
    return 0
