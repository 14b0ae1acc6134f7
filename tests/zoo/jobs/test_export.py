"""Every way to write a deployable or quantized detector, run as a user runs it (``python -m
zoo``) on a tiny SSD: zoo export to an MXNet artifact (fused and portable), ONNX, OpenVINO
fp32 and int8 (from an artifact and from a config), with the progress bar on (the default)
and off; zoo quantize to int8 and bf16 (it has no progress bar). The int8 commands say in one
line, before calibrating, when the CPU has no VNNI (int8's arithmetic gains less over fp32
there), and say nothing where it has one: the CPU is simulated by the /proc/cpuinfo file
that ``zoo.predictor.cpu_flags`` reads."""
import os
import subprocess
import sys

import pytest

import zoo
from zoo import artifact
from zoo.data import embedded
import zoo.predictor

from factories import TINY_SSD, initialised_artifact, tiny_ssd_yaml

from factories import ROOT
ENV = dict(os.environ, PYTHONPATH=ROOT)
NO_BF16 = zoo.predictor.bf16_unavailable()
NOTE = ("warning: this CPU has neither avx512_vnni nor avx_vnni (VNNI, int8 dot products): "
        "int8's arithmetic peak is about 1.5x fp32's here against 3.1x with VNNI; measure "
        "both with zoo benchmark --dtypes fp32,int8 before deploying int8")
CPUS = {"no VNNI": "fpu sse4_2 avx avx2 fma avx512f avx512bw",
        "AVX-512 VNNI": "fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni",
        "AVX-VNNI": "fpu sse4_2 avx avx2 fma avx_vnni"}
"""Simulated CPUs: their /proc/cpuinfo flags."""
ON_CPU = """import runpy, sys
from zoo import process
process.use_fast_settings()  # as python -m zoo does, before MXNet loads
import zoo.predictor
zoo.predictor.cpu_flags.__defaults__ = (%r,)  # the simulated CPU's /proc/cpuinfo
sys.argv = ["zoo"] + %r
runpy.run_module("zoo", run_name="__main__", alter_sys=True)
"""
"""``python -m zoo ARGV`` on a simulated CPU."""
CALIBRATION = ["--calib-images", "2", "--batch-size", "2"]

EXPORTS = {
    "mxnet": [],
    "mxnet portable": ["--no-fuse"],
    "onnx": ["--format", "onnx"],
    "openvino": ["--format", "openvino"],
    "openvino int8": ["--format", "openvino", "--int8", *CALIBRATION],
}
"""``zoo export`` flags of each format."""


def zoo_command(argv, cpu=None, cwd=ROOT):
    """``python -m zoo ARGV`` from this checkout, on this machine's CPU or on the simulated
    ``cpu`` (a file of :data:`CPUS`' flags)."""
    argv = [str(word) for word in argv]
    command = ([sys.executable, "-m", "zoo", *argv] if cpu is None
               else [sys.executable, "-c", ON_CPU % (cpu, argv)])
    return subprocess.run(command, capture_output=True, text=True, cwd=str(cwd), env=ENV,
                          timeout=600)


def notes(done):
    """The lines of ``done``'s stderr that say the CPU has no VNNI."""
    return [line for line in done.stderr.splitlines() if "(VNNI, int8 dot products)" in line]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny SSD artifact of the embedded dataset's classes (conftest's ``shapes``)."""
    return initialised_artifact(str(tmp_path_factory.mktemp("tiny") / "ssd"),
                                "ssd_mobilenetv2_stride8", embedded.CLASSES, **TINY_SSD)


@pytest.fixture(scope="module")
def cpus(tmp_path_factory):
    """``{name: /proc/cpuinfo file}`` of :data:`CPUS`."""
    folder = tmp_path_factory.mktemp("cpus")
    files = {}
    for name, flags in CPUS.items():
        files[name] = str(folder / (name.replace(" ", "_") + ".cpuinfo"))
        with open(files[name], "w") as stream:
            stream.write("processor\t: 0\nflags\t\t: %s\n" % flags)
    return files


@pytest.mark.parametrize("progress", [True, False], ids=["progress", "no-progress"])
@pytest.mark.parametrize("form", sorted(EXPORTS))
def test_every_export_runs_with_and_without_its_progress_bar(form, progress, tiny, shapes,
                                                             cpus, tmp_path):
    """An int8 export calibrates under its bar (``zoo export --int8`` once failed there with
    a TypeError): on a CPU without VNNI with the bar, on one with it without."""
    int8 = "--int8" in EXPORTS[form]
    argv = ["export", "--checkpoint", tiny, "--output", tmp_path / "out", *EXPORTS[form]]
    argv += ["--data-root", shapes] if int8 else []
    argv += [] if progress else ["--no-progress"]
    cpu = cpus["no VNNI" if progress else "AVX-512 VNNI"] if int8 else None
    done = zoo_command(argv, cpu)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("epoch 0 written to %s" % (tmp_path / "out")), done.stdout
    assert ("calibrating:" in done.stderr) == (int8 and progress), done.stderr[-3000:]
    assert notes(done) == (["zoo export: " + NOTE] if int8 and progress else [])


def test_an_int8_export_of_a_config_calibrates_under_its_bar(shapes, tmp_path):
    """From a model config (freshly initialised parameters), on this machine's CPU: the note
    only where it lacks VNNI."""
    config = tmp_path / "tiny.yaml"
    config.write_text(tiny_ssd_yaml())
    done = zoo_command(["export", "--network", config, "--output", tmp_path / "out",
                        *EXPORTS["openvino int8"], "--data-root", shapes])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "calibrating:" in done.stderr and os.path.isfile(tmp_path / "out.xml")
    assert notes(done) == ([] if zoo.predictor.int8_speed_note() is None
                           else ["zoo export: " + NOTE])


@pytest.mark.parametrize("cpu", ["no VNNI", "AVX-VNNI"])
def test_int8_quantization_says_where_the_cpu_has_no_vnni(cpu, tiny, shapes,
                                                                        cpus, tmp_path):
    output = tmp_path / "int8"
    done = zoo_command(["quantize", "--checkpoint", tiny, "--data-root", shapes,
                        "--calib-batches", 1, "--batch-size", 2, "--output", output],
                       cpus[cpu])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.endswith("artifact written to %s\n" % output), done.stdout
    assert notes(done) == (["zoo quantize: " + NOTE] if cpu == "no VNNI" else [])
    assert artifact.load(str(output)).is_int8


@pytest.mark.skipif(NO_BF16 is not None, reason="no native bf16: %s" % NO_BF16)
def test_bf16_quantization_runs(tiny, tmp_path):
    output = tmp_path / "bf16"
    done = zoo_command(["quantize", "--checkpoint", tiny, "--dtype", "bf16", "--output",
                        output])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.endswith("artifact written to %s\n" % output) and not notes(done)


def test_no_note_where_the_cpu_flags_cannot_be_read(monkeypatch):
    """Not Linux (no /proc/cpuinfo): nothing is known, so nothing is said."""
    monkeypatch.setattr(zoo.predictor, "cpu_flags", lambda: frozenset())
    assert zoo.predictor.int8_speed_note() is None
