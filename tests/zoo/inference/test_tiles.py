"""Tiled detection (zoo.inference.tiles): the tile grid, boxes mapped back to the photo, the
merge across tile seams, the full pass kept, bad settings refused in one line, through
``zoo detect --tiles`` and ``detector(..., tiles=...)``.

A marker "network" stands in for a trained one where the answer must be known: it finds the
red squares of its input, but only those at least :data:`MARKER_MIN` of its input's side, as
a network misses objects shrunk to a few pixels."""
import json
import math
import os

import cv2
import numpy as np
import pytest

from zoo.cli import main
from zoo.errors import OptionsError
from zoo.inference.runner import BatchDetector
from zoo.inference.tiles import (DEFAULT_OVERLAP, MIN_TILE, Tiling, merge, photo_rows,
                                 tile_starts, windows)
from zoo.jobs.detect import DetectOptions, detect

MARKER_MIN = 0.05
"""The least side, as a share of the window (or input) side, of a square the marker finds."""
GRAY, RED = 128, (255, 0, 0)


def photo_with(squares, width=1200, height=900):
    """A gray photo with red squares ``(x1, y1, x2, y2)`` (pixels, x2 and y2 excluded)."""
    image = np.full((height, width, 3), GRAY, np.uint8)
    for x1, y1, x2, y2 in squares:
        image[y1:y2, x1:x2] = RED
    return image


def red_boxes(image, least):
    """The boxes of the red blobs of an RGB ``image`` at least ``least`` of its side, as rows
    ``[0, 0.9, x1, y1, x2, y2]`` normalised to the image (x2, y2: past the last pixel)."""
    mask = ((image[:, :, 0] > 200) & (image[:, :, 1] < 60)).astype(np.uint8)
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask)
    height, width = mask.shape
    rows = [[0, 0.9, x / width, y / height, (x + w) / width, (y + h) / height]
            for x, y, w, h, _ in stats[1:count]
            if max(w / width, h / height) >= least]
    return np.array(rows, np.float32).reshape(-1, 6)


class ExactRunner:
    """A runner that sees every window at full resolution: boxes exact to the pixel, only of
    squares at least :data:`MARKER_MIN` of the window's side (the full pass misses small
    ones). Records each call's windows."""

    def __init__(self):
        self.calls = []

    def outputs(self, source, batch_size, progress=None):
        self.calls.append(list(source.parts))
        for index in range(len(source)):
            window = source.load(index)
            yield index, red_boxes(window, MARKER_MIN), (window.shape[1], window.shape[0])


def in_pixels(rows, width, height):
    return rows[:, 2:6] * [width, height, width, height]


# The grid.

@pytest.mark.parametrize("length,tile,overlap", [(4000, 800, 0.2), (3000, 800, 0.2),
                                                 (1000, 300, 0.0), (999, 64, 0.9),
                                                 (801, 800, 0.5)])
def test_tiles_cover_the_side_with_at_least_the_asked_overlap(length, tile, overlap):
    starts = tile_starts(length, tile, overlap)
    assert starts[0] == 0 and starts[-1] == length - tile  # from border to border
    shared = [tile - (b - a) for a, b in zip(starts, starts[1:])]
    assert min(shared) >= overlap * tile
    # As few as that: one tile fewer, a whole number of pixels apart, could not keep it.
    assert (len(starts) - 2) * math.floor(tile - overlap * tile) + tile < length


def test_the_windows_are_the_whole_photo_then_tiles_of_one_shape():
    parts = windows(4000, 3000, Tiling(800, 0.2))
    assert parts[0] == (0, 0, 4000, 3000)
    assert {(x1 - x0, y1 - y0) for x0, y0, x1, y1 in parts[1:]} == {(800, 800)}
    covered = np.zeros((3000, 4000), bool)
    for x0, y0, x1, y1 in parts[1:]:
        covered[y0:y1, x0:x1] = True
    assert covered.all()
    # A photo within one tile runs whole only; a narrow one in tiles as wide as it.
    assert windows(600, 500, Tiling(800)) == [(0, 0, 600, 500)]
    assert {(x1 - x0, y1 - y0) for x0, y0, x1, y1 in windows(500, 2000, Tiling(800))[1:]} \
        == {(500, 800)}


# Mapping back and merging, on the exact runner.

def test_boxes_map_back_to_the_photo_exactly_and_once():
    # Small squares (the full pass misses them): one inside a tile, one in the overlap of
    # two tiles (found whole by both), one across a seam (cut in one tile, whole in the next).
    squares = [(100, 100, 130, 130), (420, 200, 450, 230), (490, 600, 530, 640)]
    runner = ExactRunner()
    rows = photo_rows(runner, photo_with(squares), Tiling(500, 0.2), batch_size=4)
    assert red_boxes(photo_with(squares), MARKER_MIN).shape[0] == 0  # the full pass alone
    found = sorted(map(tuple, in_pixels(rows, 1200, 900).round(3)))
    assert found == sorted(map(tuple, np.array(squares, np.float32)))
    assert len(runner.calls) == 1 and len(runner.calls[0]) == len(windows(1200, 900,
                                                                           Tiling(500, 0.2)))


def test_a_cut_piece_is_dropped_where_the_neighbour_holds_the_whole_object():
    photo = photo_with([(490, 600, 530, 640)])
    runner = ExactRunner()
    pieces = []
    for index, rows, _ in runner.outputs(_source(photo, Tiling(500, 0.2)), 1):
        pieces.append(len(rows))
    assert sum(pieces) >= 2  # seen by more than one tile, at least one of them cut
    rows = photo_rows(ExactRunner(), photo, Tiling(500, 0.2), batch_size=4)
    assert len(rows) == 1


def test_the_full_pass_finds_an_object_larger_than_a_tile():
    # Larger than any tile: every tile sees a piece of it, cut; only the whole pass sees it.
    big = (100, 50, 1000, 850)
    rows = photo_rows(ExactRunner(), photo_with([big]), Tiling(300, 0.2), batch_size=4)
    assert [tuple(box) for box in in_pixels(rows, 1200, 900).round(3)] == [big]


def test_merge_keeps_a_lone_piece_and_one_of_duplicates():
    rows = np.array([[0, 0.9, 0.1, 0.1, 0.2, 0.2],     # a piece nothing whole holds: kept
                     [1, 0.8, 0.5, 0.5, 0.6, 0.6],     # a whole box
                     [1, 0.7, 0.51, 0.5, 0.6, 0.61],   # the same object from another tile
                     [0, 0.6, 0.5, 0.5, 0.6, 0.6]],    # another class at the same place
                    np.float32)
    merged = merge(rows, np.array([True, False, False, False]))
    np.testing.assert_allclose(merged[:, :2], [[0, 0.9], [1, 0.8], [0, 0.6]], rtol=1e-6)


def _source(image, tiles):
    from zoo.inference.tiles import Windows
    return Windows(image, windows(image.shape[1], image.shape[0], tiles))


# Bad settings.

@pytest.mark.parametrize("size,overlap,words", [(MIN_TILE - 1, 0.2, "at least %d" % MIN_TILE),
                                                (800, 1.0, "[0, 1)"), (800, -0.1, "[0, 1)"),
                                                (0, 0.3, "with --tiles 0")])
def test_a_bad_setting_is_one_line(size, overlap, words):
    with pytest.raises(OptionsError) as error:
        DetectOptions(checkpoint="x", inputs=("a.jpg",), tiles=size, tile_overlap=overlap)
    assert words in str(error.value) and "\n" not in str(error.value)


# Through the batch runner of every runtime, and the zoo detect job.

class MarkerEngine:
    """Runs a batch as a network would, on the preprocessed input: the red squares at least
    :data:`MARKER_MIN` of the input's side. Records each batch's size."""

    def __init__(self):
        self.batch_sizes = []

    def launch(self, data, im_info):
        self.batch_sizes.append(len(data))
        rows = np.full((len(data), 8, 6), -1, np.float32)
        for index, image in enumerate(data):
            red = ((image[0] > 1.5) & (image[1] < -1.0)).astype(np.uint8)[:, :, None]
            found = red_boxes(np.concatenate([red * 255, red * 0, red * 0], axis=2),
                              MARKER_MIN)[:8]
            rows[index, :len(found)] = found
        return rows

    def fetch(self, handle):
        return handle


class MarkerDetector(BatchDetector):
    """A detector of one class, ``square``, on a 128-pixel stretched input."""

    def __init__(self):
        self.marker = MarkerEngine()
        super().__init__(["square"], {"mean": [123.68, 116.779, 103.939],
                                      "std": [58.393, 57.12, 57.375], "resize": "stretch",
                                      "data_shape": [128, 128]})

    def engine(self):
        return self.marker


SMALL = [(200, 200, 236, 236), (700, 500, 740, 540), (1100, 100, 1130, 130)]


def test_tiles_find_small_objects_the_full_pass_misses_in_batches():
    detector = MarkerDetector()
    photo = photo_with(SMALL)
    assert len(detector(photo)) == 0
    tiled = detector(photo, tiles=300, batch_size=8)
    assert len(tiled) == len(SMALL)
    # An input pixel is 2.3 photo pixels: the warp's blur moves an edge by a pixel or two.
    np.testing.assert_allclose(sorted(tiled.boxes.tolist()), sorted(SMALL), atol=8)
    assert max(detector.marker.batch_sizes) == 8  # tiles run in batches, not one by one
    assert tiled.frame == "displayed" and tiled.names == ["square"] * 3


def test_zoo_detect_job_runs_tiles_and_records_them(tmp_path):
    cv2.imwrite(str(tmp_path / "big.png"), photo_with(SMALL)[:, :, ::-1])
    output = str(tmp_path / "out")
    summary = detect(DetectOptions(checkpoint="marker", inputs=(str(tmp_path / "big.png"),),
                                   output=output, tiles=300, progress=False),
                     detector=MarkerDetector())
    assert summary.detections == len(SMALL)
    with open(os.path.join(output, "results.json")) as stream:
        results = json.load(stream)
    assert results["settings"]["tiles"] == 300
    assert results["settings"]["tile_overlap"] == DEFAULT_OVERLAP


def zoo_detect(capsys, *argv):
    """``zoo detect ARGV``: (exit status, stderr); a usage error's status too."""
    try:
        status = main(["detect", *argv])
    except SystemExit as exit_:
        status = exit_.code
    return status, capsys.readouterr().err


def test_zoo_detect_tiles_on_an_artifact(tmp_path, detect_prefix, capsys):
    cv2.imwrite(str(tmp_path / "photo.jpg"), photo_with(SMALL, 400, 300))
    output = str(tmp_path / "out")
    status, err = zoo_detect(capsys, "--checkpoint", detect_prefix, str(tmp_path / "photo.jpg"),
                             "--output", output, "--tiles", "128", "--tile-overlap", "0.25",
                             "--threshold", "0.3", "--no-progress")
    assert status == 0, err
    with open(os.path.join(output, "results.json")) as stream:
        results = json.load(stream)
    assert (results["settings"]["tiles"], results["settings"]["tile_overlap"]) == (128, 0.25)
    boxes = [row["box"] for row in results["images"][0]["detections"]]
    assert boxes and all(0 <= x1 < x2 <= 400 and 0 <= y1 < y2 <= 300
                         for x1, y1, x2, y2 in boxes)
    # Continuing it with other tiles is refused: its records would mean other things.
    status, err = zoo_detect(capsys, "--checkpoint", detect_prefix, str(tmp_path / "photo.jpg"),
                             "--output", output, "--tiles", "256", "--tile-overlap", "0.25",
                             "--threshold", "0.3", "--resume")
    assert status == 1 and "tiles 128, this one 256" in err


@pytest.mark.parametrize("flags,words", [(["--tiles", "32"], "at least %d" % MIN_TILE),
                                         (["--tiles", "800", "--tile-overlap", "1"],
                                          "argument --tile-overlap"),
                                         (["--tiles", "0", "--tile-overlap", "0.3"],
                                          "with --tiles 0"),
                                         (["--tile-overlap", "0.3"], "needs a tile size")])
def test_zoo_detect_refuses_a_bad_tile_setting_in_one_line(tmp_path, capsys, flags, words,
                                                           detect_prefix):
    """Refused in one line; an overlap alone only once the checkpoint (``detect_prefix``,
    not trained on tiles) says it has no tiles to overlap."""
    cv2.imwrite(str(tmp_path / "a.jpg"), photo_with(SMALL, 400, 300))
    status, err = zoo_detect(capsys, "--checkpoint", detect_prefix, str(tmp_path / "a.jpg"),
                             "--output", str(tmp_path / "out"), *flags)
    assert status in (1, 2)  # a user error, a usage error
    assert err.startswith("zoo detect: error: ") and err.count("\n") == 1
    assert words in err


def test_the_continue_command_keeps_the_tiles():
    from zoo.cli import build_parser
    from zoo.cli.detect import continue_command, detect_options
    given = detect_options(build_parser("detect").parse_args(
        ["detect", "--checkpoint", "m.onnx", "photos/", "--tiles", "400", "--tile-overlap",
         "0.3"]))
    assert " --tiles 400 --tile-overlap 0.3 " in continue_command(given)


@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_zoo_detect_tiles_on_a_deployed_file_as_on_mxnet(tmp_path, detect_prefix, capsys,
                                                          runtime):
    """The same tiled ``zoo detect`` (default progress bar and batch) on the artifact and on
    its ONNX Runtime or OpenVINO export finds the same boxes: tiles run through the one runner
    in every runtime."""
    pytest.importorskip("onnxruntime" if runtime == "onnx" else "openvino")
    cv2.imwrite(str(tmp_path / "photo.jpg"), photo_with(SMALL, 400, 300))
    deployed = str(tmp_path / ("ssd.onnx" if runtime == "onnx" else "ssd.xml"))
    assert main(["export", "--checkpoint", detect_prefix, "--format", runtime,
                 "--output", deployed]) == 0
    found = {}
    for name, checkpoint in (("mxnet", detect_prefix), (runtime, deployed)):
        output = str(tmp_path / name)
        status, err = zoo_detect(capsys, "--checkpoint", checkpoint, str(tmp_path / "photo.jpg"),
                                 "--output", output, "--tiles", "128", "--threshold", "0.3")
        assert status == 0, err
        with open(os.path.join(output, "results.json")) as stream:
            found[name] = sorted((row["class_id"], row["box"])
                                 for row in json.load(stream)["images"][0]["detections"])
    assert len(found["mxnet"]) > 3
    assert [label for label, _ in found[runtime]] == [label for label, _ in found["mxnet"]]
    np.testing.assert_allclose([box for _, box in found[runtime]],
                               [box for _, box in found["mxnet"]], atol=0.5)
