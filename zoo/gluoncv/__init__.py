"""GluonCV's trained detectors as zoo artifacts: ``import_gluoncv(name, output=PREFIX)``
builds the zoo model that computes what GluonCV's ``name`` computes, maps every parameter
onto it and writes a format-2 artifact with GluonCV's class names and preprocessing.

What can be imported (:data:`IMPORTERS`) is said here, without loading MXNet, so that ``zoo
import-gluoncv --help`` lists it at once; the maps (:mod:`zoo.gluoncv.ssd`,
:mod:`zoo.gluoncv.rcnn`) and the import's steps (:mod:`zoo.gluoncv.common`) load MXNet and
GluonCV when an import runs."""
import importlib
from dataclasses import dataclass
from typing import Callable

from zoo.errors import OptionsError

__all__ = ["IMPORTERS", "Importer", "import_gluoncv", "mapping"]


@dataclass(frozen=True)
class Importer:
    """How one GluonCV model becomes ours.

    ``gluoncv_name``: the name ``gluoncv.model_zoo.get_model`` takes. ``config``: the
    registered zoo config whose model computes what GluonCV's does; its
    classes are replaced by GluonCV's. ``classes``: the dataset GluonCV trained it on
    ("voc" or "coco"). ``map_params(gluon, model)``: ``{our arg or aux name: array}`` made
    from ``gluon``, a :class:`~zoo.gluoncv.common.GluonArrays` of GluonCV's arrays by
    parameter name."""
    gluoncv_name: str
    config: str
    classes: str
    map_params: Callable


def mapping(module, function):
    """The map ``function`` of this package's ``module``, imported when it is first called
    (the maps' modules load MXNet)."""
    def map_params(gluon, model):
        return getattr(importlib.import_module(".%s" % module, __name__), function)(gluon, model)
    return map_params


IMPORTERS = {importer.gluoncv_name: importer for importer in (
    Importer("ssd_512_resnet50_v1_voc", "ssd_resnet50_v1_gluoncv_voc", "voc",
             mapping("ssd", "map_ssd_resnet_v1")),
    Importer("ssd_512_resnet50_v1_coco", "ssd_resnet50_v1_gluoncv_coco", "coco",
             mapping("ssd", "map_ssd_resnet_v1")),
    Importer("ssd_512_mobilenet1.0_voc", "ssd_mobilenet1.0_gluoncv_voc", "voc",
             mapping("ssd", "map_ssd_mobilenet")),
    Importer("ssd_512_mobilenet1.0_coco", "ssd_mobilenet1.0_gluoncv_coco", "coco",
             mapping("ssd", "map_ssd_mobilenet")),
    Importer("ssd_300_mobilenet0.25_voc", "ssd_mobilenet0.25_gluoncv_voc", "voc",
             mapping("ssd", "map_ssd_mobilenet")),
    Importer("ssd_300_mobilenet0.25_coco", "ssd_mobilenet0.25_gluoncv_coco", "coco",
             mapping("ssd", "map_ssd_mobilenet")),
    Importer("faster_rcnn_resnet50_v1b_voc", "faster_rcnn_resnet50_gluoncv_voc", "voc",
             mapping("rcnn", "map_c4")),
    Importer("faster_rcnn_resnet50_v1b_coco", "faster_rcnn_resnet50_gluoncv_coco", "coco",
             mapping("rcnn", "map_c4")),
    Importer("faster_rcnn_fpn_resnet50_v1b_coco", "faster_rcnn_fpn_resnet50_gluoncv_coco",
             "coco", mapping("rcnn", "map_fpn")),
)}
"""GluonCV model name -> :class:`Importer`."""


def import_gluoncv(name, params=None, output=None):
    """Import GluonCV's detector ``name`` (one of :data:`IMPORTERS`) from the parameter file
    ``params`` (e.g. one GluonCV's ``save_parameters`` wrote after training), or, without
    one, from GluonCV's model store (network access on first use), as the artifact at
    ``output``; returns a :class:`zoo.gluoncv.common.ImportResult`."""
    if name not in IMPORTERS:
        raise OptionsError("unknown GluonCV detector %r; importable: %s"
                           % (name, ", ".join(sorted(IMPORTERS))))
    from zoo.gluoncv.common import run_import  # loads MXNet and GluonCV
    return run_import(IMPORTERS[name], output, params)
