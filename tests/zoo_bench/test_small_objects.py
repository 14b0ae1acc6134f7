"""``zoo benchmark-small-objects`` (zoo_bench.small_objects): the bird photos are made from
the seed alone, their boxes lie in the frame a viewer shows (read back through the zoo's
COCO reader, EXIF applied), and the benchmark runs the recipe end to end at a tiny size."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from zoo.cli import main
from zoo.data.factory import open_dataset
from zoo_bench import small_objects
from zoo_bench.options import SmallObjectsBenchmarkOptions


def generate(folder, *flags):
    """``zoo benchmark-small-objects --generate-only`` into ``folder`` at a small size."""
    assert main(["benchmark-small-objects", "--generate-only", "--work-dir", str(folder),
                 "--train-images", "4", "--val-images", "2", "--test-images", "2",
                 "--width", "400", "--height", "300", "--test-width", "800",
                 "--test-height", "600", *flags]) == 0


def split_files(folder):
    """``{relative path: bytes}`` of every file the generator wrote."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as stream:
                found[os.path.relpath(path, folder)] = stream.read()
    return found


def test_the_same_seed_writes_the_same_bytes_and_another_seed_others(tmp_path, capsys):
    generate(tmp_path / "a")
    generate(tmp_path / "b")
    generate(tmp_path / "c", "--seed", "1")
    out = capsys.readouterr().out
    assert "test: %s" % os.path.join(str(tmp_path / "c"), "test.json") in out, out
    first, second, other = (split_files(tmp_path / name) for name in "abc")
    assert sorted(first) == sorted(["train.json", "val.json", "test.json"]
                                   + ["train/train_%04d.jpg" % i for i in range(4)]
                                   + ["val/val_%04d.jpg" % i for i in range(2)]
                                   + ["test/test_%04d.jpg" % i for i in range(2)])
    assert first == second
    assert sorted(other) == sorted(first)
    assert all(other[name] != first[name] for name in first if name.endswith(".jpg"))


def test_birds_lie_inside_their_photos_in_the_frame_a_viewer_shows(tmp_path):
    generate(tmp_path)
    for split, size in (("train", (400, 300)), ("val", (400, 300)), ("test", (800, 600))):
        with open(tmp_path / (split + ".json")) as stream:
            coco = json.load(stream)
        assert coco["categories"] == [small_objects.CATEGORY]
        assert small_objects.CATEGORY["id"] == 16 and small_objects.CATEGORY["name"] == "bird"
        dataset = open_dataset("coco", None, split,
                               annotations=str(tmp_path / "{split}.json"),
                               image_dir=str(tmp_path / "{split}"))
        turned = 0
        for index, record in enumerate(dataset.records):
            stored = Image.open(record.path)
            orientation = stored.getexif().get(0x0112, 1)
            turned += orientation != 1
            assert stored.size == (size if orientation == 1 else size[::-1])
            assert (record.width, record.height) == size
            boxes = record.boxes
            assert 1 <= len(boxes) <= small_objects.BIRDS[1]
            assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= size[0]).all() \
                and (boxes[:, 3] <= size[1]).all()
            sides = np.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
            assert (sides >= 0.5 * small_objects.BIRD_SIDES[0] * max(size)).all()
            assert (sides <= small_objects.BIRD_SIDES[1] * max(size) + 2).all()
            # The photo the zoo reads (EXIF applied) is the one the boxes were drawn on:
            # drawn again from the seed, it matches up to JPEG's loss, and unturned it
            # would not even have the photo's shape.
            image, _ = dataset[index]
            rng = np.random.RandomState([0, sum(map(ord, split)), index])
            drawn, drawn_boxes = small_objects.draw_photo(rng, *size)
            assert np.abs(image.astype(int) - drawn).mean() < 6
            assert np.allclose(boxes, [(x1, y1, x2 + 1, y2 + 1)
                                       for x1, y1, x2, y2 in drawn_boxes])
        assert turned == len(dataset) // 2


def test_the_scorer_gives_one_to_the_truth_and_less_to_a_shifted_box(tmp_path):
    generate(tmp_path)
    with open(tmp_path / "test.json") as stream:
        coco = json.load(stream)
    names = {image["id"]: image["file_name"] for image in coco["images"]}

    def results(shift):
        images = {}
        for row in coco["annotations"]:
            x, y, w, h = row["bbox"]
            images.setdefault(row["image_id"], []).append(
                {"category_id": 16, "score": 0.9, "box": [x + shift, y, x + w + shift, y + h]})
        return {"images": [{"file": os.path.join("somewhere", names[image_id]),
                            "detections": rows} for image_id, rows in images.items()]}

    assert small_objects.score_detections(str(tmp_path / "test.json"),
                                          results(0))["AP"] == 1.0
    assert small_objects.score_detections(str(tmp_path / "test.json"),
                                          results(3))["AP"] < 1.0


def test_bad_options_are_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "zoo", "benchmark-small-objects",
                           "--network", "nope", "--work-dir", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "nope" in done.stderr, done.stderr


def test_each_run_is_the_recipe_with_one_thing_changed():
    options = SmallObjectsBenchmarkOptions(init_from="demo/ssd", generate_only=True)
    flags = {variant: small_objects.train_flags(options, variant)
             for variant in small_objects.VARIANTS}
    started = {variant: "--init-from" in found and found[found.index("--init-from") + 1]
               for variant, found in flags.items()}
    assert started == {"recipe": "demo/ssd", "scratch": False, "fitted": "demo/ssd",
                       "whole": "demo/ssd"}
    assert [variant for variant, found in flags.items() if "--tiles" in found] == [
        "recipe", "scratch", "fitted"]
    assert [variant for variant, found in flags.items() if "--fit-anchors" in found] == [
        "fitted"]
    scratch = SmallObjectsBenchmarkOptions(init_from="none", generate_only=True)
    assert not any("--init-from" in small_objects.train_flags(scratch, variant)
                   for variant in small_objects.VARIANTS)


def test_without_make_demo_the_benchmark_says_so_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "zoo", "benchmark-small-objects",
                           "--work-dir", str(tmp_path), "--init-from",
                           str(tmp_path / "missing" / "ssd")], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "make demo" in done.stderr, done.stderr
    assert not os.listdir(tmp_path)  # refused before any photo was made


ROW = re.compile(r"^(tiles 160, --init-from|tiles 160, random start|tiles 160, --init-from, "
                 r"--fit-anchors|whole photos, --init-from) +(\d+) +(\d+) +([-\d.]+) +([-\d.]+) "
                 r"+([-\d.]+) +([-\d.]+) +([-\d.]+) +([-\d.]+) +(\d+)$", re.M)


@pytest.mark.slow  # minutes: five trainings, four evaluations and detect runs, each a process
def test_the_benchmark_runs_the_recipe_and_its_baselines_into_one_table(tmp_path):
    generate(tmp_path)
    start = tmp_path / "start"  # what make demo's detector is to the default recipe
    trained = subprocess.run(
        [sys.executable, "-m", "zoo", "train", "--network", "ssd_mobilenetv2_stride8",
         *small_objects.data_flags(SmallObjectsBenchmarkOptions(work_dir=str(tmp_path),
                                                                generate_only=True)),
         "--data-shape", "128", "--batch-size", "2", "--epochs", "1", "--output-dir",
         str(start), "--no-progress"], capture_output=True, text=True, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    done = subprocess.run(
        [sys.executable, "-m", "zoo", "benchmark-small-objects", "--work-dir", str(tmp_path),
         "--train-images", "4", "--val-images", "2", "--test-images", "2", "--width", "400",
         "--height", "300", "--test-width", "800", "--test-height", "600", "--tiles", "160",
         "--data-shape", "128", "--epochs", "1", "--baseline-epochs", "1", "--batch-size",
         "2", "--init-from", str(start / "ssd_mobilenetv2_stride8")],
        capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    # the commands a user types, as they ran
    for command in ("zoo check-data", "zoo train", "zoo eval", "zoo detect"):
        assert "$ %s --" % command in text, text
    assert re.search(r"^\$ zoo train .*--tiles 160 --init-from \S+ --fit-anchors", text,
                     re.M), text
    assert re.search(r"^\$ zoo train .*--tiles 160 --init-from \S+ --epochs 1 ", text,
                     re.M), text  # the recipe
    assert re.search(r"^\$ zoo train .*--seed 0 --tiles 160 --epochs 1 ", text, re.M), text
    assert re.search(r"^\$ zoo detect .* --crops", text, re.M), text
    # the census of the whole photos at the input, from zoo check-data
    assert re.search(r"census: .*boxes at the 128x128 input", text), text
    rows = ROW.findall(text)
    assert [row[0] for row in rows] == [
        "tiles 160, --init-from", "tiles 160, random start", "tiles 160, --init-from, "
        "--fit-anchors", "whole photos, --init-from"], text
    for row in rows:
        assert row[1] == "1" and int(row[2]) > 0, row
        for figure in row[3:9]:
            assert -1 <= float(figure) <= 1, row
    # each run's detections of the test photos, the crops counted in the table
    for variant, row in zip(small_objects.VARIANTS, rows):
        with open(tmp_path / "detect" / variant / "results.json") as stream:
            found = json.load(stream)
        assert len(found["images"]) == 2
        assert sum(len(entry["detections"]) for entry in found["images"]) == int(row[9])
    # each command's output kept; the recipe started from the given artifact
    recipe_log = (tmp_path / "logs" / "recipe-train.log").read_text()
    assert "epoch 1" in recipe_log and "init from %s" % start in recipe_log, recipe_log
    assert "init from" not in (tmp_path / "logs" / "scratch-train.log").read_text()
    tiled = json.load(open(tmp_path / "scores" / "recipe-val.json"))
    assert tiled["tiles"]["size"] == 160, tiled
    assert json.load(open(tmp_path / "scores" / "whole-val.json"))["tiles"] is None


@pytest.mark.parametrize("grey", [25, 90, 128, 170, 235])
def test_every_bird_stands_out_from_the_background_it_covers(grey):
    # Real birds stand out against sky, foliage or ground; a bird as dark as a dark ground or
    # as brown as a brown one taught the SSD nothing (hand-cut tiles, VOC07 0.04).
    for seed in range(40):
        image = np.full((200, 200, 3), grey, np.uint8)
        box = small_objects.draw_bird(np.random.RandomState(seed), image, 60, [])
        x1, y1, x2, y2 = box
        luma = image[y1:y2 + 1, x1:x2 + 1].astype(np.float32) @ np.float32([0.299, 0.587,
                                                                            0.114])
        assert np.abs(luma - grey).max() >= small_objects.MIN_CONTRAST - 1, (seed, grey)
