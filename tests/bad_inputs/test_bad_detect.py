"""Bad-input corpus, ``zoo detect``: names from model files and inputs that would be paths,
runs stopped by a signal and continued (--resume), a full disk, a second run into one
output, inputs named twice or inside the output, symlinked folders, labels that must parse
back, damaged videos, GIFs and the files a folder leaves out. Every case runs through the
CLI on files the test writes itself."""
import dataclasses
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import unicodedata
import warnings

import cv2
import numpy as np
import pytest
from PIL import Image

import zoo
from zoo import artifact, runlock
from zoo.cli import build_parser, main

from factories import FULL_DISK, failing_writes, smooth_image, tree_hashes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(zoo.__file__)))
"""The checkout whose ``zoo`` the tests import, for a subprocess to run the same."""
THRESHOLD = "0.3"
SIZES = {"a.jpg": (97, 143), "b.png": (131, 77), "c.jpg": (60, 61)}


@pytest.fixture
def imgs(tmp_path):
    """A folder of two JPEGs and a PNG of odd sizes, written by OpenCV."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for seed, (name, (height, width)) in enumerate(sorted(SIZES.items())):
        assert cv2.imwrite(str(folder / name), smooth_image(height, width, seed))
    return folder


def run(capsys, *argv):
    """``zoo detect ARGV``: (exit status, stdout, stderr)."""
    status = main(["detect", *[str(word) for word in argv]])
    out, err = capsys.readouterr()
    return status, out, err


def detect(capsys, prefix, *argv):
    """``zoo detect`` that must succeed; returns its stdout."""
    status, out, err = run(capsys, "--checkpoint", prefix, "--threshold", THRESHOLD,
                           "--no-progress", *argv)
    assert status == 0, err
    return out


def refused(capsys, prefix, *argv, status=1):
    """``zoo detect`` that must fail in one line; returns the line."""
    code, _, err = run(capsys, "--checkpoint", prefix, "--no-progress", *argv)
    assert code == status and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("zoo detect: error: "), err
    return err.strip()


def told(caught):
    """The messages of the zoo's warnings among ``caught`` (a library's own, such as a
    deprecation on its first import, are not)."""
    package = os.path.dirname(os.path.abspath(zoo.__file__)) + os.sep
    return [str(w.message) for w in caught if w.filename.startswith(package)]


def results(output):
    with open(os.path.join(str(output), "results.json")) as handle:
        return json.load(handle)


def every_path(folder):
    return {os.path.join(parent, name) for parent, folders, names in os.walk(str(folder))
            for name in folders + names}


def copy_artifact(prefix, folder, class_names, sealed=True):
    """A copy of the artifact at ``prefix`` in ``folder`` whose JSON names ``class_names``,
    their sha256 recomputed (``sealed``: a file crafted to pass the check) or removed (an
    artifact saved before class names had one)."""
    os.makedirs(folder, exist_ok=True)
    for path in glob.glob(prefix + "-*"):
        shutil.copy(path, folder)
    copy = os.path.join(folder, os.path.basename(prefix))
    meta_path = artifact.epoch_files(copy, 0).meta
    meta = artifact.read_json(meta_path)
    meta["config"]["class_names"] = meta["class_names"] = list(class_names)
    if sealed:
        meta["class_names_sha256"] = artifact.names_sha256(class_names)
    else:
        meta.pop("class_names_sha256", None)
    with open(meta_path, "w") as stream:
        json.dump(meta, stream)
    return copy


def is_safe_component(name):
    return (name not in ("", ".", "..") and not name.startswith(".") and "/" not in name
            and "\\" not in name and len(name.encode()) <= 255
            and not any(unicodedata.category(char)[0] == "C" for char in name))


def assert_crops_stay_inside(output, found):
    """Every file written is ``results.json``, ``results.jsonl`` or ``FOLDER/SAFE_NAME``
    with a crop in ``crops/SAFE_NAME/SAFE_NAME``; each class has its own crop folder, the
    one its detections name."""
    for path in every_path(output):
        parts = os.path.relpath(path, str(output)).split(os.sep)
        assert all(is_safe_component(part) for part in parts), path
        assert parts[0] in ("results.json", "results.jsonl", "pictures", "labels", "crops")
        assert len(parts) <= (3 if parts[0] == "crops" else 2), path
        if len(parts) == 3:
            assert os.path.isfile(path), path
    folders = {}
    for entry in found["images"]:
        for detection in entry["detections"]:
            crop = detection["crop"]
            assert os.path.isfile(os.path.join(str(output), crop))
            folders.setdefault(detection["class_id"], set()).add(crop.split(os.sep)[1])
    assert len(folders) >= 2 and all(len(names) == 1 for names in folders.values()), folders
    assert len({next(iter(names)) for names in folders.values()}) == len(folders)


# -- 1. File names from data are never paths -------------------------------------------------

ESCAPING_NAMES = {
    "parent folders": ["../../../escaped", "../x", "..", "../../y"],
    "absolute paths": ["{abs}/a", "{abs}/b", "{abs}", "{abs}/c"],
    "dots": [".", "..", ".hidden", "..."],
    "separators": ["a/b", "a\\b", "c/d/e", "/"],
    "control characters": ["tab\there", "new\nline", "bell\x07", "nul\x00byte"],
    "too long": ["x" * 300, "x" * 301, "y" * 250, "\u00e9" * 200],
}


@pytest.mark.parametrize("names", list(ESCAPING_NAMES.values()), ids=list(ESCAPING_NAMES))
def test_class_names_of_an_artifact_never_leave_the_output(detect_prefix, imgs, tmp_path,
                                                          capsys, names):
    outside = tmp_path / "abs"
    names = [name.replace("{abs}", str(outside)) for name in names]
    model = copy_artifact(detect_prefix, str(tmp_path / "model"), names)
    output = tmp_path / "work" / "deep" / "out"
    before = every_path(tmp_path)
    detect(capsys, model, imgs, "--crops", "--txt", "--output", output)
    assert not outside.exists()
    assert {path for path in every_path(tmp_path) - before
            if not path.startswith(str(output))} <= {str(tmp_path / "work"),
                                                      str(tmp_path / "work" / "deep")}
    found = results(output)
    assert found["class_names"] == names
    assert_crops_stay_inside(output, found)


def test_an_artifact_saved_before_class_names_had_a_sha256_still_loads_and_stays_inside(
        detect_prefix, imgs, tmp_path, capsys):
    names = ["../../../escaped", "../x", "..", "."]
    model = copy_artifact(detect_prefix, str(tmp_path / "model"), names, sealed=False)
    output = tmp_path / "work" / "deep" / "out"
    before = every_path(tmp_path)
    detect(capsys, model, imgs, "--crops", "--output", output)
    assert all(path.startswith(str(output)) for path in every_path(tmp_path) - before
               if path not in (str(tmp_path / "work"), str(tmp_path / "work" / "deep")))
    assert_crops_stay_inside(output, results(output))


def test_class_names_in_onnx_metadata_never_leave_the_output(detect_prefix, imgs, tmp_path,
                                                             capsys):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from zoo.onnx.export import export_artifact
    path = export_artifact(artifact.load(detect_prefix), str(tmp_path / "model.onnx"))
    graph = onnx.load(path)
    names = ["../../../escaped", str(tmp_path / "abs"), "..", "a/../../b"]
    for prop in graph.metadata_props:
        if prop.key == "zoo.class_names":
            prop.value = json.dumps(names)
    onnx.save(graph, path)
    output = tmp_path / "work" / "out"
    before = every_path(tmp_path)
    detect(capsys, path, imgs, "--crops", "--output", output)
    assert all(p.startswith(str(output)) for p in every_path(tmp_path) - before
               if p != str(tmp_path / "work"))
    assert_crops_stay_inside(output, results(output))


def test_picture_names_from_input_names_are_safe(detect_prefix, imgs, tmp_path, capsys):
    odd = tmp_path / "odd"
    odd.mkdir()
    names = [".hidden.jpg", "tab\tname.jpg", "new\nline.png", "%s.jpg" % ("z" * 250)]
    for name in names:
        shutil.copy(str(imgs / "a.jpg"), str(odd / name))
    output = tmp_path / "out"
    detect(capsys, detect_prefix, *[odd / name for name in names], "--txt", "--output", output)
    found = results(output)
    assert [entry["file"] for entry in found["images"]] == [str(odd / n) for n in names]
    for entry in found["images"]:
        for key in ("picture", "labels"):
            folder, name = entry[key].split(os.sep)
            assert is_safe_component(name) and os.path.isfile(os.path.join(str(output),
                                                                           entry[key]))
    assert sorted(os.listdir(str(odd))) == sorted(names)  # the inputs untouched


# -- 2. zoo detect keeps what it made ----------------------------------------------------------

def many_images(folder, count):
    os.makedirs(str(folder), exist_ok=True)
    for index in range(count):
        cv2.imwrite(str(folder / ("%02d.jpg" % index)), smooth_image(48, 64, index))
    return folder


def test_sigint_keeps_the_results_of_every_image_finished(detect_prefix, tmp_path, capsys,
                                                          monkeypatch):
    from zoo.inference.inputs import InputImages
    folder = many_images(tmp_path / "many", 12)
    load = InputImages.load

    def interrupted_load(self, index):
        if index == 6:  # Ctrl-C while the seventh image is read
            os.kill(os.getpid(), signal.SIGINT)
        return load(self, index)
    monkeypatch.setattr(InputImages, "load", interrupted_load)
    output = tmp_path / "out"
    line = refused(capsys, detect_prefix, folder, "--batch-size", "2", "--output", output,
                   status=130)
    found = results(output)
    done = len(found["images"])
    assert 1 <= done < 12 and not found["complete"] and found["stopped_by"] == "SIGINT"
    assert line == ("zoo detect: error: stopped by SIGINT with %d of 12 images written; %s "
                    "holds their results; continue with: zoo detect --checkpoint %s %s "
                    "--output %s --batch-size 2 --no-progress --resume"
                    % (done, output / "results.json", detect_prefix, folder, output))
    for entry in found["images"]:
        assert os.path.isfile(str(output / entry["picture"]))
    with open(str(output / "results.jsonl")) as stream:
        assert [json.loads(line) for line in stream] == found["images"]


def test_a_signal_while_the_model_loads_ends_in_one_line_and_writes_nothing(
        detect_prefix, imgs, tmp_path, capsys, monkeypatch):
    import zoo.jobs.detect as job
    load = job.open_detector

    def interrupted_load(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the detector loads
        return load(*args, **kwargs)
    monkeypatch.setattr(job, "open_detector", interrupted_load)
    output = tmp_path / "out"
    line = refused(capsys, detect_prefix, imgs, "--output", output, status=130)
    assert line == "zoo detect: error: stopped by SIGINT before detecting; nothing written"
    assert not output.exists()


def test_sigterm_ends_in_one_line_with_exit_143_and_the_results(detect_prefix, tmp_path):
    clip = str(tmp_path / "long.avi")
    video = cv2.VideoWriter(clip, cv2.VideoWriter_fourcc(*"MJPG"), 25, (64, 48))
    for seed in range(400):
        video.write(smooth_image(48, 64, seed % 7))
    video.release()
    output = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo", "detect", "--checkpoint", detect_prefix, clip,
         "--output", str(output), "--no-progress", "--batch-size", "2"],
        env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    lines = output / "results.jsonl"
    deadline = time.monotonic() + 120
    while not (lines.exists() and lines.read_text()) and process.poll() is None:
        assert time.monotonic() < deadline, "no image detected in 120 s"
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    found = results(output)
    done = len(found["images"])
    assert err == ("zoo detect: error: stopped by SIGTERM with %d of 400 images written; %s "
                   "holds their results; continue with: zoo detect --checkpoint %s %s "
                   "--output %s --batch-size 2 --no-progress --resume\n"
                   % (done, output / "results.json", detect_prefix, clip, output))
    assert 1 <= done < 400 and found["stopped_by"] == "SIGTERM" and out == ""
    assert [entry["video_frame"] for entry in found["images"]] == list(range(done))


def photos(folder, count):
    """``count`` photos of odd sizes written by PIL, PNG and JPEG by turns."""
    os.makedirs(str(folder), exist_ok=True)
    for index in range(count):
        rgb = smooth_image(41 + 7 * index, 97 - 3 * index, index)[..., ::-1]
        Image.fromarray(np.ascontiguousarray(rgb)).save(
            str(folder / ("%02d%s" % (index, ".jpg" if index % 2 else ".png"))))
    return folder


def records(output):
    """The lines of ``output``'s results.jsonl."""
    return (output / "results.jsonl").read_text().splitlines()


def unlisted_files(output):
    """The files under ``output``'s pictures, labels and crops that no line of its
    results.jsonl lists, and those listed that are missing."""
    listed = {os.path.join(str(output), path) for line in records(output)
              for entry in [json.loads(line)]
              for path in [entry["picture"], entry.get("labels")]
              + [row["crop"] for row in entry["detections"] if "crop" in row] if path}
    written = {path for path in every_path(output) if os.path.isfile(path)
               and os.path.relpath(path, str(output)).split(os.sep)[0]
               in ("pictures", "labels", "crops")}
    return written ^ listed


def bar_counts(err, total):
    """The image counts the ``detecting`` progress bar showed, in order."""
    return [int(count) for count in re.findall(r"detecting:[^\r\n]*?(\d+)/%d " % total, err)]


def signal_when(monkeypatch, method, call, signals=1):
    """Send SIGINT ``signals`` times (in the main thread, so handled at once) on the
    ``call``-th call of ``DetectRun.METHOD``: after it for ``detected`` (handing an image to
    the writer), before it for ``record`` (writing its line)."""
    import zoo.jobs.detect as job
    original, calls = getattr(job.DetectRun, method), []

    def hooked(self, *args):
        calls.append(None)
        if method == "detected":
            original(self, *args)
        for _ in range(signals if len(calls) == call else 0):
            signal.raise_signal(signal.SIGINT)
        if method == "record":
            original(self, *args)
    monkeypatch.setattr(job.DetectRun, method, hooked)


def test_a_stopped_run_continues_with_the_command_it_ends_with(detect_prefix, tmp_path,
                                                               capsys, monkeypatch):
    folder, output = photos(tmp_path / "photos", 12), tmp_path / "out"
    signal_when(monkeypatch, "detected", 5)  # stops after 5 of a batch of 8
    status, out, err = run(capsys, "--checkpoint", detect_prefix, folder, "--output", output,
                           "--crops", "--threshold", THRESHOLD)
    monkeypatch.undo()
    command = ("zoo detect --checkpoint %s %s --output %s --threshold 0.3 --crops --resume"
               % (detect_prefix, folder, output))
    assert bar_counts(err, 12)[-1] == 5 == max(bar_counts(err, 12))  # records, not batches
    assert status == 130 and out == "" and err.splitlines()[-1] == (
        "zoo detect: error: stopped by SIGINT with 5 of 12 images written; %s holds their "
        "results; continue with: %s" % (output / "results.json", command))
    first = records(output)
    assert len(first) == 5 and results(output)["images"] == [json.loads(l) for l in first]
    status, out, err = run(capsys, *shlex.split(command)[2:])
    assert status == 0 and out.startswith("12 images, "), err
    assert bar_counts(err, 12)[0] == 5 and bar_counts(err, 12)[-1] == 12
    lines = records(output)
    assert lines[:5] == first and len(lines) == 12  # appended: each image once
    found = results(output)
    assert found["complete"] and found["images"] == [json.loads(line) for line in lines]
    assert sorted(entry["file"] for entry in found["images"]) == sorted(
        str(path) for path in folder.iterdir())
    assert not unlisted_files(output) and not glob.glob(str(output / "**" / "*.tmp-*"))
    before = tree_hashes(output)
    status, out, _ = run(capsys, *shlex.split(command)[2:])  # nothing left to do
    assert status == 0 and out.startswith("12 images, ") and records(output) == lines
    line = refused(capsys, detect_prefix, folder, "--output", output, "--crops", "--resume",
                   "--threshold", "0.4")
    assert line == ("zoo detect: error: --resume: the run in %s has threshold 0.3, this one "
                    "0.4; continue it with the same settings, or name a new --output"
                    % (output / "results.json"))
    assert tree_hashes(output) == before


def test_a_run_stopped_at_once_leaves_no_unlisted_file_once_resumed(detect_prefix, tmp_path,
                                                                    capsys, monkeypatch):
    folder, output = photos(tmp_path / "photos", 6), tmp_path / "out"
    # A second SIGINT as the second picture's files are written, before its record is.
    signal_when(monkeypatch, "record", 2, signals=2)
    status, _, err = run(capsys, "--checkpoint", detect_prefix, folder, "--output", output,
                         "--crops", "--threshold", THRESHOLD, "--batch-size", "2")
    monkeypatch.undo()
    line = err.splitlines()[-1]
    assert status == 130 and line.startswith(
        "zoo detect: error: stopped at once by a second SIGINT with "), line
    assert (" images written; %s lists them; continue with: zoo detect " % (
        output / "results.jsonl")) in line
    picture = os.path.join(str(output), "pictures", "01.jpg")
    assert picture in unlisted_files(output)  # its record was never written
    with open(str(output / "results.jsonl"), "a") as stream:
        stream.write('{"file": "%s", "wid' % (folder / "05.jpg"))  # killed mid-line
    status, out, err = run(capsys, *shlex.split(line.split("continue with: ")[1])[2:])
    assert status == 0 and out.startswith("6 images, "), err
    files = [json.loads(line)["file"] for line in records(output)]
    assert sorted(files) == sorted(str(path) for path in folder.iterdir())
    assert not unlisted_files(output) and os.path.isfile(picture)


def test_a_full_disk_stops_in_one_line_and_leaves_no_temporary_file(detect_prefix, imgs,
                                                                    tmp_path, capsys,
                                                                    monkeypatch):
    output = tmp_path / "out"
    opened = failing_writes(monkeypatch, FULL_DISK, os.path.join(str(output), "labels", "b."))
    status, _, err = run(capsys, "--checkpoint", detect_prefix, imgs, "--output", output,
                         "--txt", "--crops", "--threshold", THRESHOLD)
    monkeypatch.undo()
    assert not glob.glob(str(output / "**" / "*.tmp-*"), recursive=True) and len(opened) == 1
    assert not unlisted_files(output)  # b's picture and crops went with its labels
    assert status == 1 and err.splitlines()[-1] == (
        "zoo detect: error: %s: No space left on device" % (output / "labels" / "b.txt"))
    found = results(output)
    assert not found["complete"] and str(imgs / "b.png") not in [
        entry["file"] for entry in found["images"]]
    out = detect(capsys, detect_prefix, imgs, "--output", output, "--txt", "--crops",
                 "--resume")
    assert out.startswith("3 images, ") and not unlisted_files(output)


@pytest.mark.parametrize("flags", [
    [], ["--epoch", "3", "--list", "to do.txt", "--list", "more.txt", "--recursive", "--every",
         "2", "--max-detections", "7", "--classes", "cat,red fox", "--batch-size", "3",
         "--format", "png", "--no-pictures", "--crops", "--txt", "--strict", "--exif",
         "ignore", "--data-threads", "2", "--no-progress", "--exist-ok", "--threshold",
         "0.25"]], ids=["defaults", "every-flag"])
def test_the_continue_command_gives_the_run_its_settings(flags):
    from zoo.cli.detect import continue_command, detect_options

    def options(argv):
        return detect_options(build_parser("detect").parse_args(["detect"] + argv))
    given = options(["--checkpoint", "my model", "a b.jpg", "@list.txt", "photos/",
                     "--output", "out dir"] + flags)
    command = continue_command(given)
    assert command.startswith("zoo detect --checkpoint 'my model' ")
    assert " 'a b.jpg' @list.txt photos/ " in command and command.endswith(" --resume")
    again = options(shlex.split(command)[2:])
    assert again == dataclasses.replace(given, exist_ok=False, resume=True)


def test_a_second_run_into_an_output_with_files_is_refused_and_changes_nothing(
        detect_prefix, imgs, tmp_path, capsys):
    output = tmp_path / "out"
    detect(capsys, detect_prefix, imgs, "--output", output)
    before = tree_hashes(output)
    line = refused(capsys, detect_prefix, imgs / "a.jpg", "--output", output)
    assert line == ("zoo detect: error: --output %s holds files already (pictures, "
                    "results.json, results.jsonl); continue the run there with --resume, name "
                    "a new folder, or pass --exist-ok to write into it (files of the same "
                    "names are replaced)" % output)
    assert tree_hashes(output) == before


def test_exist_ok_lists_this_runs_results_and_keeps_the_earlier_records(detect_prefix, imgs,
                                                                         tmp_path, capsys):
    output = tmp_path / "out"
    detect(capsys, detect_prefix, imgs / "a.jpg", imgs / "b.png", "--output", output)
    earlier = (output / "results.jsonl").read_text()
    out = detect(capsys, detect_prefix, imgs / "c.jpg", "--output", output, "--exist-ok")
    assert out.startswith("1 images, ")
    found = results(output)
    assert [entry["file"] for entry in found["images"]] == [str(imgs / "c.jpg")]
    lines = (output / "results.jsonl").read_text()
    assert lines.startswith(earlier) and len(lines.splitlines()) == 3
    assert found["first_record"] == 3
    assert json.loads(lines.splitlines()[2]) == found["images"][0]


def test_a_run_into_an_output_in_use_is_refused(detect_prefix, imgs, tmp_path, capsys):
    output = tmp_path / "out"
    with runlock.hold(str(output / "detect.lock"), "--output folder %s" % output):
        line = refused(capsys, detect_prefix, imgs, "--output", output)
    assert line.startswith("zoo detect: error: --output folder %s is in use by pid %d "
                           % (output, os.getpid()))
    assert os.listdir(str(output)) == []


def test_an_input_inside_the_output_is_refused_and_never_overwritten(detect_prefix, imgs,
                                                                     tmp_path, capsys):
    output = tmp_path / "k07"
    detect(capsys, detect_prefix, imgs, "--output", output)
    before = tree_hashes(output)
    line = refused(capsys, detect_prefix, output / "pictures", "--output", output,
                   "--exist-ok")
    assert line == ("zoo detect: error: input %s is inside --output %s: the output folder is "
                    "never read as input; write elsewhere with --output"
                    % (output / "pictures", os.path.realpath(str(output))))
    assert tree_hashes(output) == before


def test_pictures_never_go_through_a_link_onto_the_inputs(detect_prefix, imgs, tmp_path,
                                                          capsys):
    output = tmp_path / "out"
    output.mkdir()
    os.symlink(str(imgs), str(output / "pictures"))
    before = tree_hashes(imgs)
    line = refused(capsys, detect_prefix, imgs, "--output", output, "--exist-ok")
    assert line == ("zoo detect: error: %s leads outside --output %s (a link?); name another "
                    "--output" % (output / "pictures", output))
    assert tree_hashes(imgs) == before


def test_recursive_never_reads_its_own_earlier_output(detect_prefix, imgs, tmp_path, capsys):
    output = imgs / "detected"
    first = detect(capsys, detect_prefix, imgs, "--recursive", "--output", output)
    again = detect(capsys, detect_prefix, imgs, "--recursive", "--output", output,
                   "--exist-ok")
    assert first.startswith("3 images, ") and again.startswith("3 images, ")
    found = results(output)
    assert sorted(entry["file"] for entry in found["images"]) == sorted(
        str(imgs / name) for name in SIZES)
    assert {"file": str(output), "reason": "output",
            "error": "%s: inside the --output folder, never read as input" % output} in \
        found["skipped"]
    glob_run = detect(capsys, detect_prefix, str(imgs / "**" / "*.jpg"), "--recursive",
                      "--output", output, "--exist-ok")
    assert glob_run.startswith("2 images, ")


def test_a_strict_stop_keeps_the_results_of_the_images_before_it(detect_prefix, imgs,
                                                                  tmp_path, capsys):
    whole = (imgs / "a.jpg").read_bytes()
    (imgs / "z.jpg").write_bytes(whole[:len(whole) // 2])
    output = tmp_path / "out"
    line = refused(capsys, detect_prefix, imgs, "--strict", "--batch-size", "1",
                   "--output", output)
    assert "z.jpg" in line
    found = results(output)
    done = [entry["file"] for entry in found["images"]]
    assert not found["complete"] and done
    assert done == [str(imgs / name) for name in sorted(SIZES)][:len(done)]


# -- 3. Inputs named once ---------------------------------------------------------------------

def test_one_file_named_three_ways_is_detected_once(detect_prefix, imgs, tmp_path, capsys,
                                                    monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    output = tmp_path / "out"
    out = detect(capsys, detect_prefix, "imgs/a.jpg", "./imgs/a.jpg",
                 str(tmp_path / "imgs" / ".." / "imgs" / "a.jpg"), "--output", output)
    assert out.startswith("1 images, ")
    assert [entry["file"] for entry in results(output)["images"]] == ["imgs/a.jpg"]


def test_recursive_follows_symlinked_folders_once_and_ends_on_a_loop(detect_prefix, imgs,
                                                                     tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(str(imgs / "b.png"), str(elsewhere / "e.png"))
    os.symlink(str(elsewhere), str(imgs / "linked"))
    os.symlink(str(elsewhere), str(imgs / "linked_again"))
    os.symlink(str(imgs), str(imgs / "loop"))
    os.symlink(str(imgs), str(elsewhere / "up"))  # two links back up: glob alone never ends
    expected = sorted([os.path.realpath(str(imgs / name)) for name in SIZES]
                      + [str(elsewhere / "e.png")])
    for index, spec in enumerate((imgs, imgs / "**" / "*.*")):
        output = tmp_path / ("out%d" % index)
        out = detect(capsys, detect_prefix, spec, "--recursive", "--output", output)
        files = [entry["file"] for entry in results(output)["images"]]
        assert out.startswith("4 images, ")
        assert sorted(map(os.path.realpath, files)) == expected


def test_a_double_star_glob_without_recursive_is_told(detect_prefix, imgs, tmp_path, capsys):
    (imgs / "sub").mkdir()
    shutil.copy(str(imgs / "a.jpg"), str(imgs / "sub" / "d.jpg"))
    pattern = str(imgs / "**" / "*.jpg")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = detect(capsys, detect_prefix, pattern, "--output", tmp_path / "one")
        first = told(caught)
        assert out.startswith("1 images, ")  # one level: sub/d.jpg
        del caught[:]
        out = detect(capsys, detect_prefix, pattern, "--recursive", "--output", tmp_path / "all")
        assert out.startswith("3 images, ") and not told(caught)
    assert first == ["input %r: '**' matches a single folder level without --recursive; add "
                    "--recursive to search every subfolder" % pattern]


# -- 4a. Labels that parse back ----------------------------------------------------------------

def test_txt_lines_carry_the_class_id_and_split_into_seven_fields(detect_prefix, imgs, tmp_path,
                                                                  capsys):
    names = ["stop sign", "traffic\tlight", "fire  hydrant", " "]
    model = copy_artifact(detect_prefix, str(tmp_path / "model"), names)
    output = tmp_path / "out"
    detect(capsys, model, imgs, "--txt", "--output", output)
    found = results(output)
    for entry in found["images"]:
        stem = os.path.splitext(os.path.basename(entry["picture"]))[0]
        with open(str(output / "labels" / (stem + ".txt"))) as stream:
            rows = [line.split() for line in stream]
        assert rows and all(len(row) == 7 for row in rows), rows
        for row, detection in zip(rows, entry["detections"], strict=True):
            assert int(row[0]) == detection["class_id"]
            assert row[1] == "_".join(names[int(row[0])].split(" ")).replace("\t", "_")
            np.testing.assert_allclose([float(v) for v in row[3:]], detection["box"],
                                       atol=0.006)


# -- 7. Damaged videos, GIFs, what a folder leaves out ------------------------------------------

def write_video(path, frames):
    video = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (80, 64))
    for seed in range(frames):
        video.write(smooth_image(64, 80, seed))
    video.release()


def test_a_video_cut_short_is_named_with_the_frames_read(detect_prefix, tmp_path, capsys):
    whole, cut = tmp_path / "whole.avi", tmp_path / "cut.avi"
    write_video(whole, 30)
    data = whole.read_bytes()
    cut.write_bytes(data[:len(data) // 2])
    capture = cv2.VideoCapture(str(cut))
    read = 0
    while capture.grab():
        read += 1
    assert 0 < read < 30
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = detect(capsys, detect_prefix, cut, "--output", tmp_path / "out", "--no-pictures")
        first = told(caught)
        del caught[:]
        detect(capsys, detect_prefix, whole, "--output", tmp_path / "whole", "--no-pictures")
        assert not told(caught)  # the whole video: silent
    assert out.startswith("%d images, " % read)
    assert first == ["%s: damaged or cut short: %d of the 30 frames its container declares "
                    "could be read; detecting on those" % (cut, read)]


def test_a_gif_is_read_as_its_first_frame(detect_prefix, imgs, tmp_path, capsys):
    frames = [Image.fromarray(smooth_image(70, 90, seed)[:, :, ::-1]) for seed in (5, 6, 7)]
    frames[0].save(str(imgs / "anim.gif"), save_all=True, append_images=frames[1:],
                   duration=100, loop=0)
    output = tmp_path / "out"
    detect(capsys, detect_prefix, imgs, "--output", output)
    found = results(output)
    entry, = [e for e in found["images"] if e["file"].endswith("anim.gif")]
    assert (entry["width"], entry["height"]) == (90, 70) and not found["skipped"]
    first = np.asarray(Image.open(str(imgs / "anim.gif")).convert("RGB"))
    expected = zoo.load_detector(detect_prefix)(first, score_threshold=float(THRESHOLD))
    np.testing.assert_allclose([d["box"] for d in entry["detections"]], expected.boxes,
                               atol=0.01)
    assert entry["picture"] == os.path.join("pictures", "anim.png")


def test_every_file_a_folder_leaves_out_is_named_with_its_reason(detect_prefix, imgs, tmp_path,
                                                                 capsys):
    (imgs / "2024").mkdir()
    (imgs / ".git").mkdir()
    for name in ("IMG_0002.HEIC", "notes.txt", ".DS_Store", "._a.jpg"):
        (imgs / name).write_bytes(b"\0\0\0\x18ftypheic")
    output = tmp_path / "out"
    out = detect(capsys, detect_prefix, imgs, "--output", output)
    assert out.startswith("3 images, ") and ", 0 skipped, 6 left out; " in out
    skipped = {item["file"]: item["reason"] for item in results(output)["skipped"]}
    assert skipped == {str(imgs / "IMG_0002.HEIC"): "type", str(imgs / "notes.txt"): "type",
                       str(imgs / ".DS_Store"): "hidden", str(imgs / "._a.jpg"): "hidden",
                       str(imgs / ".git"): "hidden", str(imgs / "2024"): "subfolder"}


# -- issue 33, 4: decoding and writing at normal priority --------------------------------------

def test_decoding_and_writing_run_at_normal_priority(detect_prefix, imgs, tmp_path, capsys,
                                                     monkeypatch):
    from zoo.inference.inputs import InputImages
    import zoo.jobs.detect as job
    policies = []
    load, save = InputImages.load, job.save_image

    def recorded(function):
        def call(*args):
            policies.append(os.sched_getscheduler(0))
            return function(*args)
        return call
    monkeypatch.setattr(InputImages, "load", recorded(load))
    monkeypatch.setattr(job, "save_image", recorded(save))
    detect(capsys, detect_prefix, imgs, "--crops", "--output", tmp_path / "out")
    assert len(policies) > 3 and set(policies) == {os.SCHED_OTHER}


def test_a_normal_run_on_the_shapes_data_stays_silent(detect_prefix, shapes, tmp_path, capsys,
                                                      caplog):
    """The healthy case of every warning and line above: the embedded dataset's images,
    named as a folder, a glob and a list file, into a new output."""
    listing = tmp_path / "list.txt"
    listing.write_text(os.path.join(shapes, "JPEGImages") + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = detect(capsys, detect_prefix, os.path.join(shapes, "JPEGImages"),
                     os.path.join(shapes, "JPEGImages", "**", "*.jpg"), "@%s" % listing,
                     "--recursive", "--crops", "--txt", "--output", tmp_path / "out")
    found = results(tmp_path / "out")
    count = len(os.listdir(os.path.join(shapes, "JPEGImages")))
    assert out.startswith("%d images, " % count) and ", 0 skipped; " in out
    assert not told(caught), told(caught)
    assert not caplog.text and not found["skipped"] and found["complete"]
