"""The layout: the symbol factories stand apart from the zoo, the benchmarks above it, and the
old import path of the factories still works."""
import importlib
import os
import subprocess
import sys
import warnings

import symbols

from factories import ROOT
FACTORY_MODULES = ["symbols.layers", "symbols.boxes", "symbols.box_coder", "symbols.backbones",
                   "symbols.ssd", "symbols.rpn", "symbols.faster_rcnn", "symbols.fpn",
                   "symbols.rcnn_targets"]


def test_symbols_import_nothing_from_zoo():
    code = ("import sys; import %s; print(sorted(m for m in sys.modules if m == 'zoo' "
            "or m.startswith('zoo.')))" % ", ".join(FACTORY_MODULES))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0] == "[]"


def test_the_zoo_imports_nothing_of_the_benchmarks():
    """Every module of the zoo imported: none loads the benchmarks' package, which is not
    installed (the command line loads a benchmark command's module by name)."""
    code = ("import importlib, pkgutil, sys, warnings; warnings.simplefilter('ignore'); "
            "import zoo; names = [m.name for m in pkgutil.walk_packages(zoo.__path__, 'zoo.')]; "
            "[importlib.import_module(name) for name in names]; print(len(names)); "
            "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'zoo_bench'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    count, loaded = done.stdout.split("\n")[:2]
    assert int(count) > 50 and loaded == "[]"


def test_every_architecture_has_a_symbol_factory():
    for arch in symbols.FACTORIES:
        module = symbols.factory(arch)
        assert hasattr(module, "inference_symbol") and hasattr(module, "training_symbol")


def test_the_old_zoo_modeling_path_warns_and_aliases_symbols():
    sys.modules.pop("zoo.modeling", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modeling = importlib.import_module("zoo.modeling")
    assert any(issubclass(w.category, DeprecationWarning) and "symbols" in str(w.message)
               for w in caught)
    from zoo.modeling import ssd, get_backbone
    assert ssd is importlib.import_module("symbols.ssd")
    assert get_backbone is importlib.import_module("symbols.backbones").get_backbone
    assert modeling.BACKBONES is importlib.import_module("symbols.backbones").BACKBONES
