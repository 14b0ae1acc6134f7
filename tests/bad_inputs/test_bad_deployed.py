"""Bad-input corpus, deployed files and what ``zoo export`` writes: a damaged, missing or
mismatched ONNX file or OpenVINO IR is one line through every command that loads one
(``zoo detect``, ``zoo eval``) and the zoo's own error from Python; an IR's ``.bin`` is
checked against the sha256 its ``.xml`` records; ``zoo export --output`` names the same
file for every format and refuses a folder; repeated class names are refused wherever a
class list is made or read; an OpenVINO export on a full disk is one line and leaves no
staging file."""
import hashlib
import json
import os
import re

import cv2
import numpy as np
import pytest

import zoo
from zoo import artifact
from zoo.cli import main
from zoo.errors import OnnxModelError, OptionsError
from zoo.onnx.openvino_runtime import WEIGHTS_SHA256, write_ir

from factories import one_error_line, tiny_ssd_yaml
from test_onnx_runtime import NAMES, SHORT_SIDE, write_export

TINY_CLASSES = ["circle", "square", "triangle"]
"""The classes of the export tests' model: the tiny SSD of :data:`factories.TINY_SSD`, which
exports in a second."""


def read(path):
    with open(path, "rb") as stream:
        return stream.read()


def sha256(path):
    return hashlib.sha256(read(path)).hexdigest()


# -- Deployed files that do not load -----------------------------------------------------------

@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """Toy exports (see test_onnx_runtime.py) and their IRs, written once: ``toy`` and
    ``other`` (the same graph with other normalising constants: a ``.bin`` of the same size
    and other weights), ``small`` (another graph, a smaller ``.bin``), and ``twice`` (class
    names repeated in its metadata); plus an image to detect on."""
    folder = tmp_path_factory.mktemp("deployed")
    other = dict(SHORT_SIDE, mean=[100.0, 90.0, 80.0], std=[30.0, 20.0, 10.0])
    for name, preprocessing, graph, metadata in (
            ("toy", SHORT_SIDE, "normalize", None),
            ("other", other, "normalize", None),
            ("small", SHORT_SIDE, "none", None),
            ("twice", SHORT_SIDE, "normalize",
             {"zoo.class_names": json.dumps(["circle", "square", "circle"])})):
        onnx_path = write_export(folder / (name + ".onnx"), preprocessing, graph, im_info=True,
                                 metadata=metadata)
        write_ir(onnx_path, str(folder / (name + ".xml")), {"dtype": "fp32"})
    image = str(folder / "photo.png")
    cv2.imwrite(image, np.random.RandomState(0).randint(0, 256, (45, 70, 3), np.uint8))
    return str(folder)


def copied(deployed, tmp_path, xml, weights):
    """``tmp_path/m.xml`` holding the ``.xml`` of ``xml`` beside ``weights`` (bytes, or
    None for no ``.bin``)."""
    path = tmp_path / "m.xml"
    path.write_bytes(xml if isinstance(xml, bytes) else read(os.path.join(deployed, xml)))
    if weights is not None:
        (tmp_path / "m.bin").write_bytes(weights)
    return str(path)


def truncated_onnx(deployed, tmp_path):
    data = read(os.path.join(deployed, "toy.onnx"))
    (tmp_path / "m.onnx").write_bytes(data[:len(data) // 2])
    return str(tmp_path / "m.onnx")


def empty_onnx(deployed, tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"")
    return str(tmp_path / "m.onnx")


def toy_bin(deployed):
    return read(os.path.join(deployed, "toy.bin"))


def recorded_as(deployed, value):
    """The toy ``.xml`` with its weights' record replaced by ``value``."""
    xml = read(os.path.join(deployed, "toy.xml")).decode()
    pattern = r'(<%s value=")[0-9a-f]{64}(")' % WEIGHTS_SHA256[1]
    assert len(re.findall(pattern, xml)) == 1
    return re.sub(pattern, r"\g<1>%s\g<2>" % value, xml).encode()


DEPLOYED_FAULTS = [
    # (id, make(deployed folder, tmp_path) -> path, what the line says after "PATH: ")
    ("truncated onnx", truncated_onnx, "not an ONNX model (its protobuf does not parse)"),
    ("missing onnx", lambda d, t: str(t / "missing.onnx"), "no such file"),
    ("empty onnx", empty_onnx, "an empty file (0 bytes), not an ONNX model"),
    ("onnx naming a class twice", lambda d, t: os.path.join(d, "twice.onnx"),
     "zoo.class_names = [\"circle\", \"square\", \"circle\"]: expected a JSON list of class "
     "names, none repeated"),
    ("missing xml", lambda d, t: str(t / "missing.xml"), "no such file"),
    ("truncated xml", lambda d, t: copied(d, t, read(os.path.join(d, "toy.xml"))[:3000],
                                          toy_bin(d)),
     "not an OpenVINO IR (its XML does not parse: "),
    ("xml without its bin", lambda d, t: copied(d, t, "toy.xml", None), "its weights "),
    ("xml with a smaller model's bin",
     lambda d, t: copied(d, t, "toy.xml", read(os.path.join(d, "small.bin"))),
     "not the weights"),
    ("xml with a same-sized bin of other weights",
     lambda d, t: copied(d, t, "toy.xml", read(os.path.join(d, "other.bin"))),
     "not the weights"),
    ("xml whose weights record is no sha256",
     lambda d, t: copied(d, t, recorded_as(d, "0123abc"), toy_bin(d)),
     "zoo.weights_sha256 = '0123abc': expected 64 hexadecimal digits"),
    ("xml naming a class twice", lambda d, t: os.path.join(d, "twice.xml"),
     "expected a JSON list of class names, none repeated"),
]


def named(line, path, expected):
    """Whether the error ``line`` names the file at fault (the ``.xml``, or for weights that
    are not its own, the ``.bin``) and says ``expected``."""
    weights = path[:-len(".xml")] + ".bin"
    return expected in line and (": %s: " % path in line or ": %s: " % weights in line)


@pytest.mark.parametrize("make, expected", [case[1:] for case in DEPLOYED_FAULTS],
                         ids=[case[0] for case in DEPLOYED_FAULTS])
def test_a_deployed_file_that_does_not_load_is_one_line_in_detect(deployed, tmp_path, capsys,
                                                                  make, expected):
    path = make(deployed, tmp_path)
    status = main(["detect", os.path.join(deployed, "photo.png"), "--checkpoint", path,
                   "--output", str(tmp_path / "found"), "--no-progress"])
    line = one_error_line(capsys, "detect")
    assert status == 1 and named(line, path, expected), line


@pytest.mark.parametrize("make, expected", [case[1:] for case in DEPLOYED_FAULTS],
                         ids=[case[0] for case in DEPLOYED_FAULTS])
def test_a_deployed_file_that_does_not_load_is_one_line_in_eval(deployed, tmp_path, capsys,
                                                                make, expected):
    path = make(deployed, tmp_path)
    # The file is loaded before the dataset is opened: an empty folder is dataset enough.
    status = main(["eval", "--checkpoint", path, "--data-root", str(tmp_path),
                   "--no-progress"])
    line = one_error_line(capsys, "eval")
    assert status == 1 and named(line, path, expected), line


@pytest.mark.parametrize("make, expected", [case[1:] for case in DEPLOYED_FAULTS],
                         ids=[case[0] for case in DEPLOYED_FAULTS])
def test_a_deployed_file_that_does_not_load_is_the_zoos_error_in_python(deployed, tmp_path,
                                                                       make, expected):
    path = make(deployed, tmp_path)
    loader = zoo.load_openvino_detector if path.endswith(".xml") else zoo.load_onnx_detector
    for load in (zoo.load_deployed_detector, loader):
        with pytest.raises(OnnxModelError) as caught:
            load(path)
        assert "\n" not in str(caught.value) and named(": " + str(caught.value), path,
                                                        expected), caught.value


def test_a_deployed_file_of_another_suffix_is_the_zoos_error(tmp_path):
    with pytest.raises(OnnxModelError, match=r"m\.pb: a deployed detector is a \.onnx or "
                                             r"\.xml file"):
        zoo.load_deployed_detector(str(tmp_path / "m.pb"))


def test_the_healthy_ir_records_its_weights_and_runs(deployed, capsys):
    """The case the checks must leave alone: an IR beside its own ``.bin`` detects."""
    path = os.path.join(deployed, "toy.xml")
    assert 'weights_sha256 value="%s"' % sha256(os.path.join(deployed, "toy.bin")) in \
        read(path).decode()
    found = zoo.load_deployed_detector(path)(os.path.join(deployed, "photo.png"),
                                             score_threshold=0.0)
    assert len(found) > 0 and set(found.names) <= set(NAMES)


BENCHMARKED_FAULTS = ["truncated onnx", "xml with a same-sized bin of other weights"]


@pytest.mark.parametrize("make, expected", [case[1:] for case in DEPLOYED_FAULTS
                                             if case[0] in BENCHMARKED_FAULTS],
                         ids=BENCHMARKED_FAULTS)
def test_a_deployed_file_that_does_not_load_is_one_line_in_benchmark(deployed, tmp_path,
                                                                     capsys, make, expected):
    """zoo benchmark times a deployed file alone on its runtime: one that does not load is
    refused as eval refuses it."""
    path = make(deployed, tmp_path)
    assert main(["benchmark", "--checkpoint", path, "--runs", "1", "--warmup", "0"]) == 1
    line = one_error_line(capsys, "benchmark")
    assert named(line, path, expected), line


# -- zoo export --output -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The YAML config of the tiny SSD of :data:`TINY_CLASSES`, and of the same model naming
    a class twice."""
    folder = tmp_path_factory.mktemp("configs")
    twice = TINY_CLASSES[:2] + TINY_CLASSES[:1]
    for name, class_names in (("tiny", TINY_CLASSES), ("twice", twice)):
        (folder / (name + ".yaml")).write_text(tiny_ssd_yaml(num_classes=len(class_names),
                                                             class_names=class_names))
    return str(folder / "tiny.yaml")


def listing(folder):
    return sorted(os.listdir(folder))


EXPORT_REFUSALS = [
    # (format, output under the test's folder, what the line says)
    ("onnx", "out/", "output {tmp}/out/ names a folder, not the file to write: give a name in "
                     "it, e.g. {tmp}/out/tiny.onnx"),
    ("onnx", "out/.onnx", "output {tmp}/out/.onnx names a folder, not the file to write: give "
                          "a name in it, e.g. {tmp}/out/tiny.onnx"),
    ("onnx", "out", "output {tmp}/out names a folder, not the file to write"),
    ("openvino", "out/", "output {tmp}/out/ names a folder, not the file to write: give a "
                         "name in it, e.g. {tmp}/out/tiny.xml"),
    ("mxnet", "out/.", "output {tmp}/out/. names a folder, not the file to write"),
    ("onnx", "m.xml", "output {tmp}/m.xml ends in .xml, which --format onnx does not write: "
                      "give {tmp}/m (writing {tmp}/m.onnx)"),
    ("mxnet", "m.onnx", "output {tmp}/m.onnx ends in .onnx, which --format mxnet does not "
                        "write: give {tmp}/m (writing {tmp}/m-NNNN.json and .params)"),
    ("openvino", "m.bin", "output {tmp}/m.bin ends in .bin, which --format openvino does not "
                          "write: give {tmp}/m (writing {tmp}/m.xml and {tmp}/m.bin)"),
]


@pytest.mark.parametrize("format, output, expected", EXPORT_REFUSALS,
                         ids=["%s %s" % case[:2] for case in EXPORT_REFUSALS])
def test_export_refuses_a_folder_or_another_formats_name(tiny, tmp_path, capsys, format, output,
                                                         expected):
    (tmp_path / "out").mkdir()
    before = listing(tmp_path), listing(tmp_path / "out")
    status = main(["export", "--network", tiny, "--format", format,
                   "--output", os.path.join(str(tmp_path), output)])
    line = one_error_line(capsys, "export")
    assert status == 1 and expected.format(tmp=tmp_path) in line, line
    assert (listing(tmp_path), listing(tmp_path / "out")) == before  # nothing written


def test_export_output_ending_in_the_formats_suffix_names_that_file(tiny, tmp_path, capsys):
    """``--output m.onnx`` writes m.onnx (not m.onnx.onnx), ``--output v.xml`` writes v.xml
    and v.bin, the ``.xml`` recording the ``.bin``'s sha256; ``--output m`` names the same
    files, so the CLI and the docs say one thing for every format."""
    assert main(["export", "--network", tiny, "--format", "onnx",
                 "--output", str(tmp_path / "m.onnx")]) == 0
    assert main(["export", "--network", tiny, "--format", "openvino",
                 "--output", str(tmp_path / "v.xml")]) == 0
    out = capsys.readouterr().out
    assert "epoch 0 written to %s\n" % (tmp_path / "m.onnx") in out
    assert "epoch 0 written to %s\n" % (tmp_path / "v.xml") in out
    assert listing(tmp_path) == ["m.onnx", "v.bin", "v.xml"]
    xml = read(tmp_path / "v.xml").decode()
    assert '<weights_sha256 value="%s" />' % sha256(tmp_path / "v.bin") in xml
    found = zoo.load_deployed_detector(str(tmp_path / "v.xml"))(np.zeros((50, 60, 3),
                                                                         np.uint8))
    assert found.boxes.shape[1:] == (4,)


# -- A full disk under the OpenVINO export -----------------------------------------------------

@pytest.mark.parametrize("staged", ["m.writing.bin", "m.writing.xml"])
def test_an_openvino_export_on_a_full_disk_is_one_line_and_leaves_nothing(tiny, tmp_path, capsys,
                                                                         staged):
    """Each staging file in turn is written to /dev/full, which fails every write as a full
    disk does (ENOSPC): OpenVINO reports only its stream's error."""
    os.symlink("/dev/full", str(tmp_path / staged))
    status = main(["export", "--network", tiny, "--format", "openvino",
                   "--output", str(tmp_path / "m")])
    line = one_error_line(capsys, "export")
    assert status == 1 and line.startswith("zoo export: error: %s: cannot be written ("
                                           % (tmp_path / "m.xml")), line
    assert "is the disk full?" in line
    assert listing(tmp_path) == []  # no staging file, no half an IR


# -- Repeated class names ----------------------------------------------------------------------

def test_a_config_naming_a_class_twice_is_refused(tiny, tmp_path, capsys):
    twice = os.path.join(os.path.dirname(tiny), "twice.yaml")
    assert main(["export", "--network", twice, "--format", "onnx",
                 "--output", str(tmp_path / "m")]) == 1
    line = one_error_line(capsys, "export")
    assert "class_names = ['circle', 'square', 'circle']: " in line
    assert "with no repeated value" in line and listing(tmp_path) == []


@pytest.fixture(scope="module")
def twice_artifact(tiny, tmp_path_factory):
    """An artifact whose JSON names a class twice, written as a zoo that did not check
    would have written it (its class list, not a later edit)."""
    prefix = str(tmp_path_factory.mktemp("twice") / "twice")
    model = zoo.build_model(zoo.load_config(tiny))
    model.init_params(seed=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(artifact, "class_names", lambda config: ["circle", "square", "circle"])
        artifact.save(prefix, 1, model, model.arg_params, model.aux_params)
    return prefix


def test_an_artifact_naming_a_class_twice_is_refused(twice_artifact, tmp_path, capsys):
    assert main(["eval", "--checkpoint", twice_artifact, "--data-root", str(tmp_path)]) == 1
    line = one_error_line(capsys, "eval")
    assert line == ('zoo eval: error: %s-0001.json: class_names = ["circle", "square", '
                    '"circle"]: expected a list of class names, none repeated'
                    % twice_artifact)


def test_an_init_source_naming_a_class_twice_is_refused(twice_artifact, shapes, tmp_path,
                                                         capsys):
    status = main(["train", "--init-from", twice_artifact, "--dataset", "voc",
                   "--data-root", shapes, "--epochs", "1", "--batch-size", "2",
                   "--val-split", "", "--output-dir", str(tmp_path / "run"),
                   "--no-progress", "--data-threads", "1"])
    line = one_error_line(capsys, "train")
    assert status == 1 and "class_names = [\"circle\", \"square\", \"circle\"]: " in line
    assert not (tmp_path / "run").exists() or listing(tmp_path / "run") == []


def test_an_onnx_export_naming_a_class_twice_is_refused(tiny, tmp_path):
    from zoo.onnx.export import export_model
    model = zoo.build_model(zoo.load_config(tiny))
    with pytest.raises(OptionsError, match="class_names repeat 'circle': classes of one name "
                                           "cannot be told apart"):
        export_model(model, *model.init_params(seed=0), str(tmp_path / "m.onnx"),
                     class_names=["circle", "square", "circle"])
    assert listing(tmp_path) == []
