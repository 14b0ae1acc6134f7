"""The layout: the symbol factories stand apart from the zoo, the benchmarks above it, the
old import path of the factories still works, and the tests' imports of each other's helpers
name modules and names that exist."""
import ast
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


def _assigned(target):
    """The names an assignment's target binds: ``A`` or each of ``A, B`` (not ``a.b``, ``a[i]``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _assigned(element)]
    return []


def top_level_names(path):
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(name for target in targets for name in _assigned(target))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_every_import_of_another_test_module_names_what_it_holds():
    """A test module imports helpers from another (or from conftest.py, factories.py) by its
    name (conftest puts every test folder on the path), often inside a slow test: a renamed or
    moved module or helper fails here, in `make test`, not first in `make test-slow`
    (test_precision's bf16 dist_sync test imported the old ``test_launch``)."""
    tests = os.path.join(ROOT, "tests")
    modules = {name[:-3]: os.path.join(folder, name) for folder, _, names in os.walk(tests)
               for name in names if name.endswith(".py")}
    missing = []
    for module, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(open(path).read())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            if node.module not in modules:  # a package's module, or one of the tests' gone
                if node.module.startswith("test"):
                    missing.append("%s: no test module %s" % (module, node.module))
                continue
            held = top_level_names(modules[node.module])
            missing += ["%s: %s has no %s" % (module, node.module, alias.name)
                        for alias in node.names if alias.name not in held]
    assert not missing, missing
