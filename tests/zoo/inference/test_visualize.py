"""Detections drawn on images, the training-log plot and its command-line tool."""
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

import zoo.cli
from zoo.inference.visualize import class_color, draw_detections, plot_training_log, save_png

from factories import ROOT
PLOT_LOG = os.path.join(ROOT, "tools", "plot_log.py")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NAMES = ["cat", "dog"]
HEIGHT, WIDTH = 200, 300
# A box from (60, 60) to (180, 140) in pixels, well inside the image.
BOX = [0.2, 0.3, 0.6, 0.7]


def blank():
    return np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)


def changed(before, after):
    """(H, W) mask of the pixels that differ."""
    return np.any(before != after, axis=2)


def test_box_outline_drawn_and_far_pixels_untouched():
    image = blank()
    drawn = draw_detections(image, np.array([[1, 0.9] + BOX]), NAMES)
    assert not image.any(), "the input image must not be modified"
    mask = changed(image, drawn)
    assert mask[100, 60] and mask[100, 180] and mask[140, 120], "left, right and bottom edges"
    assert mask[45:60, 60:120].any(), "the label sits above the box"
    assert not mask[75:125, 75:165].any(), "the inside of the box stays clear"
    assert not mask[160:, :].any() and not mask[:, 200:].any(), "nothing far from the box"
    assert tuple(drawn[100, 60]) == class_color(1)


def test_padding_rows_and_low_scores_are_ignored():
    image = blank()
    rows = np.array([[-1, -1, -1, -1, -1, -1], [0, 0.3] + BOX, [-1, 0.9] + BOX])
    assert np.array_equal(draw_detections(image, rows, NAMES), image)
    assert changed(image, draw_detections(image, rows, NAMES, score_threshold=0.2)).any()


def test_label_stays_inside_the_image():
    # A box in the top-right corner: no room above it, and a long label must shift left.
    image = blank()
    drawn = draw_detections(image, np.array([[0, 0.99, 0.9, 0.0, 1.0, 0.3]]),
                            ["a rather long class name"])
    mask = changed(image, drawn)
    label_rows = mask[2:12, :WIDTH - 40]  # below the top edge, left of the box
    assert label_rows.any(), "the label is drawn inside the image, moved left of the box"


def test_classes_have_distinct_colours():
    colours = [class_color(class_id) for class_id in range(20)]
    assert len(set(colours)) == 20


def test_save_png_round_trip(tmp_path):
    image = draw_detections(blank(), np.array([[0, 0.9] + BOX]), NAMES)
    path = tmp_path / "detections.png"
    save_png(str(path), image)
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert np.array_equal(cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB), image)


def write_log(path, rows, header="epoch,loss,cls_loss,box_loss,lr,samples_per_sec,val_map"):
    path.write_text("\n".join([header] + rows) + "\n")
    return str(path)


TRAINING_LOG = ["%d,%.3f,%.3f,%.3f,0.001,120.5,%s" % (
    epoch, 3 / epoch, 2 / epoch, 1 / epoch, "%.3f" % (0.1 * epoch) if epoch % 2 == 0 else "")
    for epoch in range(1, 9)]


def test_plot_training_log_writes_a_png(tmp_path):
    png = str(tmp_path / "log.png")
    assert plot_training_log(write_log(tmp_path / "log.csv", TRAINING_LOG), png) == png
    with open(png, "rb") as handle:
        assert handle.read(8) == PNG_SIGNATURE
    height, width = cv2.imread(png).shape[:2]
    assert 800 <= width <= 2000 and 300 <= height <= 1000


def test_plot_training_log_without_validation(tmp_path):
    rows = ["1,2.0,,,0.1,10,", "2,1.5,,,0.1,10,"]
    png = plot_training_log(write_log(tmp_path / "log.csv", rows), str(tmp_path / "log.png"))
    assert os.path.getsize(png) > 0


@pytest.mark.parametrize("header, rows, message", [
    ("step,loss", ["1,2.0"], "no 'epoch' column"),
    ("epoch,loss", [], "no rows"),
    ("epoch,loss", ["1,abc"], "line 2: loss = 'abc' is not a number"),
])
def test_plot_training_log_rejects_bad_logs(tmp_path, header, rows, message):
    with pytest.raises(ValueError, match=message):
        plot_training_log(write_log(tmp_path / "bad.csv", rows, header), str(tmp_path / "x.png"))


def test_cli_writes_png_next_to_the_csv(tmp_path, capsys):
    csv_path = write_log(tmp_path / "train.csv", TRAINING_LOG)
    assert zoo.cli.main(["plot-log", csv_path]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "train.png")
    assert (tmp_path / "train.png").read_bytes().startswith(PNG_SIGNATURE)


def test_cli_missing_csv_is_a_clear_error(tmp_path, capsys):
    assert zoo.cli.main(["plot-log", str(tmp_path / "missing.csv")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zoo plot-log: error: ") and "No such file" in err


def test_cli_help_lists_the_flags(capsys):
    with pytest.raises(SystemExit) as exit_info:
        zoo.cli.main(["plot-log", "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and "csv" in out and "--output" in out


def test_cli_bad_csv_exits_with_a_message(tmp_path):
    csv_path = write_log(tmp_path / "bad.csv", ["1,2"], header="step,loss")
    result = subprocess.run([sys.executable, PLOT_LOG, csv_path, "--output",
                             str(tmp_path / "bad.png")],
                            env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.startswith("zoo plot-log: error:")
    assert "no 'epoch' column" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "bad.png").exists()


def test_draws_on_a_non_contiguous_image():
    chw = np.zeros((3, 64, 80), dtype=np.uint8)
    drawn = draw_detections(chw.transpose(1, 2, 0), np.array([[0, 0.9, 0.1, 0.1, 0.6, 0.6]]),
                            ["thing"], score_threshold=0.5)
    assert drawn.shape == (64, 80, 3) and drawn.any()
