"""Import one of GluonCV's trained detectors as a zoo artifact (``zoo import-gluoncv``):
the zoo model that computes what GluonCV's computes, every parameter mapped onto it."""
import os
from dataclasses import dataclass
from typing import Optional

from zoo.gluoncv import import_gluoncv

__all__ = ["ImportOptions", "import_detector"]


@dataclass(frozen=True)
class ImportOptions:
    name: str                            # GluonCV's model name, one of zoo.gluoncv.IMPORTERS
    output: str                          # prefix of the artifact written (epoch 0)
    params: Optional[str] = None         # GluonCV parameter file; None: GluonCV's model
                                         # store (downloads on first use)


def import_detector(options):
    """Write the artifact; returns a :class:`zoo.gluoncv.common.ImportResult`."""
    if options.params is not None and not os.path.isfile(options.params):
        raise FileNotFoundError("%s: no such parameter file" % options.params)
    return import_gluoncv(options.name, options.params, options.output)
