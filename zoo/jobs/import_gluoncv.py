"""Import one of GluonCV's trained detectors as a zoo artifact (``zoo import-gluoncv``):
the zoo model that computes what GluonCV's computes, every parameter mapped onto it."""
import os
from dataclasses import dataclass
from typing import Optional

from zoo.flags import REQUIRED, flag, options_from
from zoo.gluoncv import import_gluoncv

__all__ = ["ImportOptions", "import_detector"]


@dataclass(frozen=True)
class ImportOptions:
    """What ``zoo import-gluoncv`` imports: ``name`` is its positional word, the other fields
    declare their flags (:mod:`zoo.flags`)."""
    name: str                            # GluonCV's model name, one of zoo.gluoncv.IMPORTERS
    output: str = flag(REQUIRED, "prefix of the artifact", metavar="PREFIX")  # (epoch 0)
    params: Optional[str] = flag(        # None: GluonCV's model store (downloads on first use)
        None, "GluonCV parameter file (default: GluonCV's trained weights from its model "
              "store, which needs network access once)", metavar="FILE")

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo import-gluoncv``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)


def import_detector(options):
    """Write the artifact; returns a :class:`zoo.gluoncv.common.ImportResult`."""
    if options.params is not None and not os.path.isfile(options.params):
        raise FileNotFoundError("%s: no such parameter file" % options.params)
    return import_gluoncv(options.name, options.params, options.output)
