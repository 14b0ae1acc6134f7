"""``zoo check-data``: the data census of a dataset's training and validation splits, and
pictures of the first batches the network would get, as ``zoo train`` with the same flags
would start (the same refusals and warnings), without training. Exit status 1 where
training would refuse the data, else 0.

Example, a VOC folder being prepared, drawn as ssd_mobilenetv2 would get it:
    zoo check-data --network ssd_mobilenetv2 --dataset voc --data-root my_data \\
        --data-shape 256 --batch-size 8 --output-dir output/check
"""
from zoo.cli.common import network, options_from, positive_int
from zoo.cli.train import add_data_arguments
from zoo.jobs.check_data import CheckDataOptions, check_data

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("--network", type=network, required=True,
                   help="registered model name or YAML config path: the model whose input "
                        "the batches are drawn for")
    add_data_arguments(p, CheckDataOptions)
    p.add_argument("--output-dir", default=CheckDataOptions.output_dir,
                   help="folder of the pictures train_batch0.png, ...")
    p.add_argument("--batches", type=positive_int, default=CheckDataOptions.batches,
                   help="first batches of the first epoch to draw")


def run(args):
    result = check_data(options_from(CheckDataOptions, args))
    for line in result.lines:
        print(line)
    for path in result.pictures:
        print("picture: %s" % path)
    print("%d warning%s" % (len(result.warnings), "" if len(result.warnings) == 1 else "s"))
    return 0
