"""A plain (non-editable) install ships the configs and works from any folder; it leaves out
the benchmarks and the test hosts, which run from the source checkout, as they do from an
editable install's."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from factories import ROOT


SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "configs", "symbols", "zoo", "zoo_bench")
"""What of the checkout the wheel is built from (the benchmarks' package included, to be left
out): a copy, since setuptools would add what an earlier build left in the checkout's build/
to the wheel."""


@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory):
    """``(wheel, site)``: the checkout's wheel, built without dependencies, and the folder it
    is installed into."""
    work = tmp_path_factory.mktemp("packaging")
    source, wheels, target = work / "source", work / "wheels", work / "site"
    source.mkdir()
    for name in SOURCES:
        if os.path.isdir(os.path.join(ROOT, name)):
            shutil.copytree(os.path.join(ROOT, name), str(source / name), symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(os.path.join(ROOT, name), str(source / name))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                          str(source)], check=True, cwd=str(work))
    wheel = next(wheels.glob("*.whl"))
    subprocess.run(pip + ["install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True)
    return wheel, target


def python_from(site, code, cwd, *argv):
    """``code`` run with ``site`` as the only folder of the zoo on the path, from ``cwd``."""
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=str(cwd),
                          env=dict(os.environ, PYTHONPATH=str(site)), capture_output=True,
                          text=True)


def test_wheel_install_ships_configs(wheel_install, tmp_path):
    _, target = wheel_install
    out = python_from(target, "import zoo, zoo.data, zoo.metrics; print(zoo.__file__);"
                      "print(' '.join(zoo.list_models())); "
                      "print(zoo.get_model('ssd_resnet50').num_params())", tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    out = out.stdout.split("\n")
    assert out[0].startswith(str(target))
    assert out[1].split() == sorted(os.path.splitext(f)[0] for f in os.listdir(
        os.path.join(ROOT, "configs")) if f.endswith(".yaml"))
    assert int(out[2]) > 25_000_000


CLI = "import sys; from zoo.cli import main; sys.exit(main(sys.argv[1:]))"


def test_wheel_leaves_the_benchmarks_and_test_hosts_out(wheel_install, tmp_path):
    wheel, target = wheel_install
    names = zipfile.ZipFile(str(wheel)).namelist()
    assert any(name.startswith("zoo/cli/") for name in names)
    assert not [name for name in names if name.startswith(("zoo_bench/", "zoo/bench/"))
                or "benchmark" in name or "testhosts" in name]
    # The command table still lists them; running one says where they run, in one line.
    listed = python_from(target, CLI, tmp_path, "--help")
    assert listed.returncode == 0 and "benchmark-train" in listed.stdout
    for argv in (["benchmark", "--network", "ssd_mobilenetv2"], ["benchmark-memory", "--help"]):
        done = python_from(target, CLI, tmp_path, *argv)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr == (
            "zoo %s: error: the benchmarks are not installed with the zoo: they run from its "
            "source checkout, as python -m zoo %s ... in the checkout's folder, or as zoo %s "
            "... after pip install -e . there\n" % ((argv[0],) * 3))


# What an editable install puts on the path: a finder of the zoo's packages in the checkout,
# and not the checkout itself (setuptools' finder for `pip install -e .`).
EDITABLE = """import importlib.machinery, sys
class Checkout(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name in ("zoo", "symbols"):
            return importlib.machinery.PathFinder.find_spec(name, [%r])
sys.meta_path.insert(0, Checkout)
""" % ROOT


def test_an_editable_install_finds_the_benchmarks_in_its_checkout(tmp_path):
    code = EDITABLE + CLI.replace("sys.exit(", "status = (") + (
        "; print(sys.modules['zoo_bench'].__file__); sys.exit(status)")
    done = python_from(tmp_path, code, tmp_path, "benchmark-memory", "--network",
                       "ssd_mobilenetv2", "--configurations", "nope")
    # It got as far as the benchmark's own options: these are refused in one line.
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.startswith("zoo benchmark-memory: error: configurations must include "
                                  "plain"), done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == os.path.join(ROOT, "zoo_bench", "__init__.py")
