"""``zoo detect`` through its command line, on files the zoo did not make: odd sizes, JPEG and
PNG, a broken file in a folder, a glob, a list file and a small video; and ``zoo demo`` writing
the format its output names."""
import json
import os

import cv2
import numpy as np
import pytest
from PIL import Image

import zoo
from zoo import artifact
from zoo.cli import main

from factories import DETECT_CLASSES as CLASSES, smooth_image

THRESHOLD = 0.3
SIZES = {"wide.jpg": (97, 143), "tall.png": (131, 77), os.path.join("sub", "small.jpg"): (60, 61)}
"""Input files: (height, width), portrait and landscape, odd sides."""
VIDEO_FRAMES, EVERY = 7, 3


@pytest.fixture(scope="module")
def prefix(detect_prefix):
    return detect_prefix


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """A folder of JPEG and PNG files of odd sizes, one in a subfolder, one broken JPEG, and
    a 7-frame MJPEG video beside it."""
    root = tmp_path_factory.mktemp("photos")
    folder = root / "photos"
    (folder / "sub").mkdir(parents=True)
    for seed, (name, (height, width)) in enumerate(sorted(SIZES.items())):
        assert cv2.imwrite(str(folder / name), smooth_image(height, width, seed))
    whole = (folder / "wide.jpg").read_bytes()
    (folder / "broken.jpg").write_bytes(whole[:len(whole) // 3])
    video = cv2.VideoWriter(str(root / "clip.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 5, (80, 64))
    for seed in range(VIDEO_FRAMES):
        video.write(smooth_image(64, 80, 10 + seed))
    video.release()
    return root


def video_frames(path):
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, bgr = capture.read()
        if not ok:
            return frames
        frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))


def run(capsys, *argv):
    """``zoo detect ARGV``: (exit status, stdout, stderr)."""
    status = main(["detect", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def results(output):
    with open(os.path.join(output, "results.json")) as handle:
        return json.load(handle)


def assert_same(entry, found):
    """A results-JSON entry holds the detections ``found`` (a zoo.Detections)."""
    assert len(entry["detections"]) == len(found) > 0
    boxes = np.array([d["box"] for d in entry["detections"]])
    np.testing.assert_allclose(boxes, found.boxes, atol=0.01)
    np.testing.assert_allclose([d["score"] for d in entry["detections"]], found.scores,
                               atol=1e-5)
    assert [d["class_name"] for d in entry["detections"]] == found.names
    assert [d["class_id"] for d in entry["detections"]] == found.labels.tolist()


def test_a_folder_and_a_video_give_the_detectors_detections(prefix, photos, tmp_path, capsys,
                                                            caplog):
    output = str(tmp_path / "out")
    status, out, err = run(capsys, "--checkpoint", prefix, str(photos / "photos"), "--recursive",
                           str(photos / "clip.avi"), "--every", str(EVERY), "--crops", "--txt",
                           "--threshold", str(THRESHOLD), "--batch-size", "2",
                           "--output", output, "--no-progress")
    assert status == 0, err
    frames = list(range(0, VIDEO_FRAMES, EVERY))
    found = results(output)
    summary = "%d images, %d detections, 1 skipped; results in %s\n" % (
        len(SIZES) + len(frames), sum(len(e["detections"]) for e in found["images"]), output)
    assert out == summary
    broken = str(photos / "photos" / "broken.jpg")
    assert [s["file"] for s in found["skipped"]] == [broken]
    assert "skipped %s: truncated JPEG" % broken in caplog.text
    detector = zoo.load_detector(prefix)
    images = [e for e in found["images"] if "video_frame" not in e]
    assert sorted(e["file"] for e in images) == sorted(str(photos / "photos" / n) for n in SIZES)
    for entry in images:
        name = os.path.relpath(entry["file"], str(photos / "photos"))
        assert (entry["height"], entry["width"]) == SIZES[name]
        assert_same(entry, detector(entry["file"], score_threshold=THRESHOLD))
    decoded = video_frames(photos / "clip.avi")
    clips = [e for e in found["images"] if "video_frame" in e]
    assert [e["video_frame"] for e in clips] == frames
    for entry in clips:
        assert_same(entry, detector(decoded[entry["video_frame"]], score_threshold=THRESHOLD))
    check_files(output, found)


def check_files(output, found):
    """Pictures in their input's format, bytes matching the name; a crop per detection in
    its class's folder; a text file per picture."""
    magic = {".jpg": b"\xff\xd8", ".png": b"\x89PNG"}
    for entry in found["images"]:
        picture = os.path.join(output, entry["picture"])
        extension = os.path.splitext(picture)[1]
        expected = ".jpg" if "video_frame" in entry else os.path.splitext(entry["file"])[1]
        assert extension == expected
        with open(picture, "rb") as handle:
            assert handle.read(4).startswith(magic[extension])
        assert cv2.imread(picture).shape[:2] == (entry["height"], entry["width"])
        stem = os.path.splitext(os.path.basename(picture))[0]
        assert entry["labels"] == os.path.join("labels", stem + ".txt")
        with open(os.path.join(output, entry["labels"])) as handle:
            lines = [line.split() for line in handle.read().splitlines()]
        assert [(int(line[0]), line[1]) for line in lines] == [
            (d["class_id"], d["class_name"]) for d in entry["detections"]]
        for k, detection in enumerate(entry["detections"]):
            crop = os.path.join(output, "crops", detection["class_name"],
                                "%s_%d%s" % (stem, k, extension))
            assert os.path.join(output, detection["crop"]) == crop
            x1, y1, x2, y2 = detection["box"]
            height, width = cv2.imread(crop).shape[:2]
            assert abs(width - (x2 - x1)) <= 2 and abs(height - (y2 - y1)) <= 2, crop


def test_a_glob_a_list_file_classes_and_format(prefix, photos, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text("# photos\n%s\n\n" % (photos / "photos" / "tall.png"))
    output = str(tmp_path / "out")
    status, _, err = run(capsys, "--checkpoint", prefix, str(photos / "photos" / "*.jpg"),
                         "@%s" % listing, "--classes", "star,circle", "--format", "png",
                         "--output", output, "--threshold", str(THRESHOLD), "--no-progress",
                         "--max-detections", "1000")
    assert status == 0, err
    found = results(output)
    assert [e["file"] for e in found["images"]] == [str(photos / "photos" / "wide.jpg"),
                                                    str(photos / "photos" / "tall.png")]
    assert len(found["skipped"]) == 1  # the glob matches the broken JPEG too
    every = zoo.load_detector(prefix)(str(photos / "photos" / "wide.jpg"),
                                      score_threshold=THRESHOLD, max_detections=1000)
    names = {d["class_name"] for e in found["images"] for d in e["detections"]}
    assert names <= {"star", "circle"} and names and set(every.names) - names
    kept = [i for i, name in enumerate(every.names) if name in ("star", "circle")]
    assert len(found["images"][0]["detections"]) == len(kept)
    for entry in found["images"]:
        assert entry["picture"].endswith(".png")
        with open(os.path.join(output, entry["picture"]), "rb") as handle:
            assert handle.read(4) == b"\x89PNG"


def test_strict_unknown_classes_and_empty_inputs_are_one_line(prefix, photos, tmp_path, capsys):
    output = str(tmp_path / "out")
    status, _, err = run(capsys, "--checkpoint", prefix, str(photos / "photos"), "--strict",
                         "--output", output, "--no-progress")
    assert status == 1 and err.startswith("zoo detect: error: ") and err.count("\n") == 1
    assert "broken.jpg" in err
    output = str(tmp_path / "out2")  # the failed run above kept its results in out
    status, _, err = run(capsys, "--checkpoint", prefix, str(photos / "photos"), "--classes",
                         "circle,bird", "--output", output)
    assert status == 1 and err == ("zoo detect: error: classes: unknown class 'bird': the "
                                   "detector's classes are %s\n" % ", ".join(CLASSES))
    status, _, err = run(capsys, "--checkpoint", prefix, str(tmp_path / "none*.jpg"),
                         "--output", output)
    assert status == 1 and "matches no file" in err and err.count("\n") == 1


def test_an_onnx_file_detects_as_its_artifact(prefix, photos, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from zoo.onnx.export import export_artifact
    onnx_path = export_artifact(artifact.load(prefix), str(tmp_path / "ssd.onnx"))
    outputs = {}
    for name, checkpoint in (("mxnet", prefix), ("onnx", onnx_path)):
        outputs[name] = str(tmp_path / name)
        status, _, err = run(capsys, "--checkpoint", checkpoint, str(photos / "photos" / "*.*"),
                             "--output", outputs[name], "--no-pictures", "--no-progress",
                             "--threshold", str(THRESHOLD))
        assert status == 0, err
    mxnet, onnx = results(outputs["mxnet"]), results(outputs["onnx"])
    assert len(onnx["images"]) == len(SIZES) - 1  # the glob does not enter sub/
    for ours, theirs in zip(mxnet["images"], onnx["images"]):
        assert ours["picture"] is None and ours["file"] == theirs["file"]
        np.testing.assert_allclose([d["box"] for d in theirs["detections"]],
                                   [d["box"] for d in ours["detections"]], atol=0.05)


def test_the_command_line_and_the_readmes_python_find_the_same_by_default(prefix, tmp_path,
                                                                         capsys):
    """One default score threshold (and count): ``zoo detect``, ``zoo demo`` and the README's
    ``zoo.open_detector(prefix)(image)`` report the same detections of a photo."""
    photo = str(tmp_path / "photo.jpg")
    Image.fromarray(smooth_image(83, 119, 7)[:, :, ::-1]).save(photo, quality=90)
    found = zoo.open_detector(prefix)(photo)
    everything = zoo.open_detector(prefix)(photo, score_threshold=0.0, max_detections=10000)
    assert 0 < len(found) < len(everything)  # the defaults leave some out
    output = str(tmp_path / "out")
    status, _, err = run(capsys, "--checkpoint", prefix, photo, "--output", output,
                         "--no-progress")
    assert status == 0, err
    assert_same(results(output)["images"][0], found)
    assert main(["demo", "--checkpoint", prefix, "--image", photo,
                 "--output", str(tmp_path / "demo.png")]) == 0
    assert capsys.readouterr().out.startswith("%d detections of at least " % len(found))


def test_demo_writes_the_format_its_output_names(prefix, photos, tmp_path, capsys):
    image = str(photos / "photos" / "wide.jpg")
    for name, magic in (("x.jpg", b"\xff\xd8"), ("x.png", b"\x89PNG")):
        assert main(["demo", "--checkpoint", prefix, "--image", image,
                     "--output", str(tmp_path / name)]) == 0
        assert (tmp_path / name).read_bytes()[:len(magic)] == magic
    assert main(["demo", "--checkpoint", prefix, "--image", image,
                 "--output", str(tmp_path / "x.gif")]) == 1
    assert "x.gif" in capsys.readouterr().err


@pytest.mark.parametrize("argv, flag", [(["--every", "0"], "--every"),
                                        (["--threshold", "2"], "--threshold"),
                                        (["--format", "gif"], "--format")])
def test_bad_flags_are_usage_errors(argv, flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["detect", "--checkpoint", "x", "a.jpg", *argv])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("zoo detect: error: argument %s" % flag)


def test_unknown_flags_after_inputs_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["detect", "--checkpoint", "x", "a.jpg", "--crops", "b.jpg", "--bogus"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "zoo detect: error: unrecognized arguments: --bogus\n"


def test_an_int8_artifact_epoch_detects_in_int8(prefix, photos, tmp_path, capsys):
    import mxnet as mx
    from zoo.inference.quantization import int8_layers, quantize
    from zoo.predictor import mkldnn_available
    if not mkldnn_available():
        pytest.skip("int8 needs MXNet with MKL-DNN")
    fp32 = artifact.load(prefix)
    calib = mx.io.NDArrayIter({"data": mx.nd.random.uniform(-2, 2, (2, 3, 128, 128))},
                              batch_size=2)
    symbol, args, aux = quantize(fp32.model.symbol(), fp32.arg_params, fp32.aux_params, calib,
                                 "naive")
    int8 = str(tmp_path / "int8")
    artifact.save(int8, 3, fp32.model, args, aux, symbol=symbol,
                  precision={"dtype": "int8", "calibration": {"mode": "naive"}})
    output = str(tmp_path / "out")
    image = str(photos / "photos" / "wide.jpg")
    status, _, err = run(capsys, "--checkpoint", int8, "--epoch", "3", image, "--output",
                         output, "--threshold", str(THRESHOLD), "--no-progress")
    assert status == 0, err
    detector = zoo.load_detector(int8, 3)
    assert int8_layers(detector.predictor.symbol)
    entry, = results(output)["images"]
    assert_same(entry, detector(image, score_threshold=THRESHOLD))


def test_list_flag_reads_paths_relative_to_the_list(prefix, photos, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    folder = os.path.relpath(str(photos / "photos"), str(tmp_path))
    listing.write_text("%s\n%s\n" % (os.path.join(folder, "tall.png"),
                                     os.path.join(folder, "sub")))
    output = str(tmp_path / "out")
    status, out, err = run(capsys, "--checkpoint", prefix, "--list", str(listing), "--output",
                           output, "--no-pictures", "--no-progress")
    assert status == 0, err
    files = [os.path.realpath(e["file"]) for e in results(output)["images"]]
    assert files == [os.path.realpath(str(photos / "photos" / name))
                     for name in ("tall.png", os.path.join("sub", "small.jpg"))]


def test_a_video_that_cannot_be_read_is_skipped_and_counted(prefix, photos, tmp_path, capsys):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video at all")
    output = str(tmp_path / "out")
    status, out, err = run(capsys, "--checkpoint", prefix, str(bad),
                           str(photos / "photos" / "tall.png"), "--output", output,
                           "--no-pictures", "--no-progress")
    assert status == 0, err
    assert out.startswith("1 images, ") and ", 1 skipped; " in out
    skipped, = results(output)["skipped"]
    assert skipped["file"] == str(bad) and str(bad) in skipped["error"]
    status, _, err = run(capsys, "--checkpoint", prefix, str(bad), "--output", output,
                         "--strict", "--exist-ok")
    assert status == 1 and err == "zoo detect: error: %s: cannot read a frame of the video\n" % bad


def test_what_a_folder_leaves_out_is_named(prefix, photos, tmp_path, capsys, caplog):
    folder = tmp_path / "phone"
    (folder / "2024").mkdir(parents=True)
    (folder / ".git").mkdir()
    for name in ("IMG_0001.JPG", os.path.join("2024", "IMG_0003.jpg")):
        (folder / name).write_bytes((photos / "photos" / "wide.jpg").read_bytes())
    (folder / ".thumbnails").mkdir()
    (folder / ".thumbnails" / "IMG_0001.jpg").write_bytes((photos / "photos" / "wide.jpg")
                                                          .read_bytes())
    for name in ("IMG_0002.HEIC", "IMG_0004.HEIC", "notes.txt", "README", ".DS_Store",
                 os.path.join(".git", "config"), "._IMG_0001.JPG"):
        (folder / name).write_bytes(b"\0\0\0\x18ftypheic")
    output = str(tmp_path / "out")
    status, out, err = run(capsys, "--checkpoint", prefix, str(folder), "--output", output,
                           "--no-progress")
    assert status == 0, err
    assert out.startswith("1 images, ") and " 0 skipped, 9 left out;" in out
    assert ("%s: left out 4 file(s) of a type zoo detect does not read (.HEIC 2, .txt 1, "
            "no extension 1); 1 hidden image or video file(s) (a name starting with a dot); "
            "1 subfolder(s) not searched (--recursive searches them)"
            % folder) in caplog.text.splitlines()[0]
    caplog.clear()
    status, out, err = run(capsys, "--checkpoint", prefix, str(folder), "--recursive",
                           "--output", output, "--no-progress", "--exist-ok")
    assert status == 0 and out.startswith("2 images, ") and " 0 skipped, 8 left out;" in out, err
    assert caplog.text.splitlines()[0].endswith(
        "%s: left out 4 file(s) of a type zoo detect does not read (.HEIC 2, .txt 1, "
        "no extension 1); 1 hidden image or video file(s) (a name starting with a dot)"
        % folder), "hidden folders are not searched, as glob leaves them"
    with open(os.path.join(output, "results.json")) as handle:
        assert not any("thumbnails" in entry["file"] for entry in json.load(handle)["images"])
    caplog.clear()
    for name in ("IMG_0001.JPG", os.path.join("2024", "IMG_0003.jpg"), "._IMG_0001.JPG"):
        (folder / name).unlink()
    listing = tmp_path / "list.txt"
    listing.write_text(str(folder) + "\n")  # a folder named in a list file is told of alike
    status, _, err = run(capsys, "--checkpoint", prefix, "@%s" % listing, "--output", output,
                         "--exist-ok")
    assert status == 1 and err == "zoo detect: error: no images or videos in @%s\n" % listing
    assert "%s: left out 4 file(s)" % folder in caplog.text


def test_pictures_waiting_for_the_writers_hold_a_bounded_memory(tmp_path, monkeypatch):
    """Where the network outruns the writers (a slow disk, int8 on a fast CPU), detection
    waits once the decoded photos waiting to be drawn hold ``MAX_WAITING_BYTES``, not only
    once ``MAX_WAITING`` pictures wait (32 phone photos held 1.1 GB)."""
    import threading

    from zoo.jobs import detect as job
    gate = threading.Event()
    monkeypatch.setattr(job, "MAX_WAITING_BYTES", 5 << 20)
    monkeypatch.setattr(job.Writer, "write", lambda self, files, image, found: gate.wait(30))
    writer = job.Writer(str(tmp_path), CLASSES, True, False, False, record=lambda entry: None)
    photo = np.zeros((1024, 1024, 3), np.uint8)  # 3 MB
    writer.submit(None, photo, None, {})
    second = threading.Thread(target=writer.submit, args=(None, photo, None, {}))
    second.start()
    second.join(0.5)
    assert second.is_alive(), "a second 3 MB photo was queued past the 5 MB bound"
    gate.set()
    second.join(30)
    assert not second.is_alive()
    writer.close()
