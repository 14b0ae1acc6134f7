"""GluonCV's trained detectors as zoo artifacts: ``import_gluoncv(name, output=PREFIX)``
builds the zoo model that computes what GluonCV's ``name`` computes, maps every parameter
onto it and writes a format-2 artifact with GluonCV's class names and preprocessing."""
from zoo.errors import OptionsError
from zoo.gluoncv import rcnn, ssd
from zoo.gluoncv.common import Importer, ImportResult, run_import

IMPORTERS = {**ssd.IMPORTERS, **rcnn.IMPORTERS}
"""GluonCV model name -> :class:`Importer`."""


def import_gluoncv(name, params=None, output=None):
    """Import GluonCV's detector ``name`` (one of :data:`IMPORTERS`) from the parameter file
    ``params`` (e.g. one GluonCV's ``save_parameters`` wrote after training), or, without
    one, from GluonCV's model store (network access on first use), as the artifact at
    ``output``; returns an :class:`ImportResult`."""
    if name not in IMPORTERS:
        raise OptionsError("unknown GluonCV detector %r; importable: %s"
                           % (name, ", ".join(sorted(IMPORTERS))))
    return run_import(IMPORTERS[name], output, params)


__all__ = ["IMPORTERS", "ImportResult", "Importer", "import_gluoncv", "rcnn", "ssd"]
