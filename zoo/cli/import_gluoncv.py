"""``zoo import-gluoncv``: one of GluonCV's trained detectors as a zoo artifact, which eval,
demo, quantize, export and benchmark take like any. Without --params the weights come from
GluonCV's model store (downloaded once to ~/.mxnet/models); with it, from a file GluonCV's
``save_parameters`` wrote (e.g. after training it further on the same classes).

Example:
    zoo import-gluoncv ssd_512_resnet50_v1_voc --output output/gluoncv/ssd_512_resnet50_v1_voc
    zoo demo --checkpoint output/gluoncv/ssd_512_resnet50_v1_voc --image street.jpg
"""
from zoo.gluoncv import IMPORTERS
from zoo.jobs.import_gluoncv import ImportOptions, import_detector
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("name", choices=sorted(IMPORTERS), metavar="NAME",
                   help="GluonCV's model name: %s" % ", ".join(sorted(IMPORTERS)))
    add_flags(p, ImportOptions, "params", "output")


def run(args):
    result = import_detector(ImportOptions.from_flags(args))
    print("GluonCV's %s (%d arrays) written to %s as zoo model %s"
          % (result.gluoncv_name, result.arrays, result.prefix, result.config))
    return 0
