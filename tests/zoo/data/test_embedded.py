"""The generated shapes dataset: deterministic, idempotent, learnable, a real VOC folder."""
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from zoo.data import VOCDataset, embedded
from zoo.errors import DataError, OptionsError

from factories import tree_bytes


def test_same_seed_writes_identical_bytes(tmp_path):
    first = embedded.generate(str(tmp_path / "a"), seed=5, num_train=6, num_val=3, image_size=128)
    second = embedded.generate(str(tmp_path / "b"), seed=5, num_train=6, num_val=3, image_size=128)
    other = embedded.generate(str(tmp_path / "c"), seed=6, num_train=6, num_val=3, image_size=128)
    files = tree_bytes(first)
    assert len(files) == 2 * 9 + 3 + 2  # images, annotations, 3 image sets, classes, manifest
    assert files == tree_bytes(second)
    assert files["JPEGImages/000000.jpg"] != tree_bytes(other)["JPEGImages/000000.jpg"]


def test_generate_is_idempotent_and_replaces_other_settings(tmp_path, monkeypatch):
    root = str(tmp_path / "shapes")
    embedded.generate(root, num_train=4, num_val=2, image_size=64)
    files = tree_bytes(root)
    with monkeypatch.context() as patch:
        patch.setattr(embedded, "draw_image", lambda *args: pytest.fail("regenerated"))
        assert embedded.generate(root, num_train=4, num_val=2, image_size=64) == root
    embedded.generate(root, num_train=3, num_val=1, image_size=64)
    smaller = tree_bytes(root)
    assert sorted(n for n in smaller if n.startswith("JPEGImages")) == [
        "JPEGImages/%06d.jpg" % i for i in range(4)]
    assert smaller["JPEGImages/000002.jpg"] == files["JPEGImages/000002.jpg"]


def test_generate_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(DataError, match="refusing to overwrite"):
        embedded.generate(str(tmp_path), num_train=2, num_val=1)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_default_root_is_under_the_output_dir():
    assert embedded.default_root("runs") == os.path.join("runs", "shapes")


def test_objects_are_learnable(tmp_path):
    size = 256
    root = embedded.generate(str(tmp_path / "shapes"), num_train=60, num_val=10, image_size=size)
    train, val = VOCDataset(root, "train"), VOCDataset(root, "val")
    assert (len(train), len(val)) == (60, 10) and train.class_names == list(embedded.CLASSES)
    counts = np.array([len(record.boxes) for record in train.records])
    assert counts.min() >= 1 and counts.max() <= embedded.MAX_OBJECTS and counts.mean() > 1.5
    classes = np.concatenate([record.class_ids for record in train.records])
    assert set(classes) == set(range(len(embedded.CLASSES)))
    for record in train.records:
        extent = (record.boxes[:, 2:] - record.boxes[:, :2]).max(axis=1) / size
        assert np.all((extent > 0.14) & (extent < 0.51))
        for i, box in enumerate(record.boxes):
            for other in record.boxes[i + 1:]:
                assert embedded.covered_fraction(box, other) <= embedded.MAX_COVERED + 0.05
    image, label = val[0]
    assert image.shape == (size, size, 3) and len(label) >= 1


def test_boxes_read_back_as_the_shapes_inclusive_pixel_extent(tmp_path, monkeypatch):
    """Each shape is also drawn, in its own colours, on a black and on a white canvas: the
    difference gives its coverage of every pixel, independent of the colours. The box read
    back from the VOC folder must be the first and last pixel covered at least half, and so
    inside the image."""
    size, count = 64, 12
    real_draw = embedded.draw_shape
    extents = []

    def recording_draw(image, shape, rng):
        state = rng.get_state()
        canvases = []
        for value in (0, 255):
            canvas = np.full_like(image, value)
            rng.set_state(state)
            real_draw(canvas, shape, rng)  # the same colours as on the image
            canvases.append(canvas.astype(np.int32))
        coverage = 1 - (canvases[1] - canvases[0]).max(axis=2) / 255
        ys, xs = np.nonzero(coverage >= 0.5)
        extents.append([xs.min(), ys.min(), xs.max(), ys.max()])
        rng.set_state(state)
        real_draw(image, shape, rng)

    monkeypatch.setattr(embedded, "draw_shape", recording_draw)
    monkeypatch.setattr(embedded, "ThreadPoolExecutor", lambda workers: ThreadPoolExecutor(1))
    root = embedded.generate(str(tmp_path / "shapes"), seed=5, num_train=count, num_val=0,
                             image_size=size)
    boxes = np.concatenate([r.boxes for r in VOCDataset(root, "train").records])
    np.testing.assert_array_equal(boxes, np.array(extents, dtype=boxes.dtype))
    assert boxes.min() >= 0 and boxes[:, 2:].max() <= size - 1
    assert boxes[:, 2:].max() == size - 1  # some shape reaches the edge: the clipped case


# sha256 of the default settings' first 24 + 8 files and the full 1,500 + 200, computed on main
# before presets existed: `make demo`'s accuracy bands are measured on exactly these bytes.
DEFAULT_FIRST_32 = "6a06b82a1c92a553de04a1d298ea2063313bc8f7429b01e8a91483751e547fe0"
DEFAULT_FULL = "87bf7c96c8b0ac7d7a57bbdb277e2a3242ca053ab21fc2a0e25efff1c3e390fe"


def digest(root):
    """One sha256 over every file's relative path and bytes, in sorted order."""
    total = hashlib.sha256()
    for name, data in sorted(tree_bytes(root).items()):
        total.update(name.replace(os.sep, "/").encode() + b"\0" + data)
    return total.hexdigest()


def test_the_default_settings_write_the_bytes_they_always_wrote(tmp_path):
    root = embedded.generate(str(tmp_path / "shapes"), seed=0, num_train=24, num_val=8)
    assert digest(root) == DEFAULT_FIRST_32


@pytest.mark.slow
def test_the_default_dataset_is_the_one_the_demo_bands_were_measured_on(tmp_path):
    assert digest(embedded.generate(str(tmp_path / "shapes"))) == DEFAULT_FULL


# ---- the hard preset --------------------------------------------------------------------------

HARD = embedded.PRESETS["hard"]


def test_presets_are_one_table_and_an_unknown_one_is_refused(tmp_path):
    shapes = embedded.PRESETS[embedded.DEFAULT_PRESET]
    assert embedded.DEFAULT_PRESET == "shapes" and set(embedded.PRESETS) >= {"shapes", "hard"}
    assert (shapes.objects[1], shapes.extent, shapes.max_covered) == (
        embedded.MAX_OBJECTS, embedded.EXTENT_RANGE, embedded.MAX_COVERED)
    assert HARD.extent[0] < shapes.extent[0] and HARD.extent[1] < shapes.extent[1]
    assert HARD.objects[1] > shapes.objects[1] and HARD.max_covered > shapes.max_covered
    with pytest.raises(OptionsError, match="preset 'harder': expected one of shapes, hard"):
        embedded.generate(str(tmp_path / "x"), num_train=1, num_val=0, preset="harder")
    assert not (tmp_path / "x").exists()


def test_the_hard_preset_is_seeded_and_its_manifest_names_it(tmp_path):
    first = embedded.generate(str(tmp_path / "a"), seed=5, num_train=6, num_val=2, preset="hard")
    second = embedded.generate(str(tmp_path / "b"), seed=5, num_train=6, num_val=2, preset="hard")
    other = embedded.generate(str(tmp_path / "c"), seed=6, num_train=6, num_val=2, preset="hard")
    files = tree_bytes(first)
    assert len(files) == 2 * 8 + 3 + 2 and files == tree_bytes(second)
    assert files["JPEGImages/000000.jpg"] != tree_bytes(other)["JPEGImages/000000.jpg"]
    preset = embedded.read_manifest(first)["preset"]
    assert preset["name"] == "hard" and preset["objects"] == list(HARD.objects)
    # the shapes preset and the hard one replace each other; a repeat writes nothing
    shapes = tree_bytes(embedded.generate(str(tmp_path / "d"), seed=5, num_train=6, num_val=2))
    assert "preset" not in embedded.read_manifest(str(tmp_path / "d"))
    embedded.generate(str(tmp_path / "d"), seed=5, num_train=6, num_val=2, preset="hard")
    assert tree_bytes(str(tmp_path / "d")) == files
    embedded.generate(str(tmp_path / "d"), seed=5, num_train=6, num_val=2)
    assert tree_bytes(str(tmp_path / "d")) == shapes


def test_hard_images_hold_objects_in_the_stated_ranges(tmp_path):
    root = embedded.generate(str(tmp_path / "hard"), seed=1, num_train=60, num_val=0,
                             preset="hard")
    records = VOCDataset(root, "train").records
    sizes = np.array([(record.width, record.height) for record in records])
    long_side, aspect = sizes.max(axis=1), sizes[:, 0] / sizes[:, 1]
    assert long_side.min() >= 256 * HARD.long_side[0]
    assert long_side.max() <= 256 * HARD.long_side[1]
    assert aspect.min() >= HARD.aspect[0] - 0.01 and aspect.max() <= HARD.aspect[1] + 0.01
    assert (aspect < 1).sum() >= 10 and (aspect > 1).sum() >= 10  # portrait and landscape
    counts = np.array([len(record.boxes) for record in records])
    assert counts.min() >= HARD.objects[0] and counts.max() <= HARD.objects[1]
    assert counts.mean() > 5 and (counts > embedded.MAX_OBJECTS).sum() >= 20
    classes = np.concatenate([record.class_ids for record in records])
    assert set(classes) == set(range(len(embedded.CLASSES)))
    for record in records:
        extent = (record.boxes[:, 2:] - record.boxes[:, :2]).max(axis=1) / max(
            record.width, record.height)
        assert np.all((extent > HARD.extent[0] - 0.01) & (extent < HARD.extent[1] + 0.01))
        for i, box in enumerate(record.boxes):
            for other in record.boxes[i + 1:]:
                assert embedded.covered_fraction(box, other) <= HARD.max_covered + 0.05


def test_hard_boxes_are_the_objects_drawn_extent_and_distractors_get_none(tmp_path,
                                                                           monkeypatch):
    """As the shapes' test above: every object is also drawn alone on a black and a white
    canvas of the image's size; the boxes read back must be those extents, in the order
    drawn, inside each (non-square) image. A pixel whose coverage the colours round to
    about half may fall either way, so a box edge must lie between the extents at 40% and
    60% coverage (and nearly all equal the 50% one). The distractors drawn meanwhile must
    neither be annotated nor share an extent with a box."""
    real_shape, real_distractor = embedded.draw_shape, embedded.draw_distractor
    extents, distractors, sizes = [], [], []

    def coverage_box(draw, image, shape, rng):
        state = rng.get_state()
        canvases = []
        for value in (0, 255):
            canvas = np.full_like(image, value)
            rng.set_state(state)
            draw(canvas, shape, rng)
            canvases.append(canvas.astype(np.int32))
        coverage = 1 - (canvases[1] - canvases[0]).max(axis=2) / 255
        rng.set_state(state)
        draw(image, shape, rng)
        extent = []
        for least in (0.4, 0.5, 0.6):
            ys, xs = np.nonzero(coverage >= least)
            extent.append([xs.min(), ys.min(), xs.max(), ys.max()])
        return extent

    monkeypatch.setattr(embedded, "draw_shape", lambda image, shape, rng: extents.append(
        coverage_box(real_shape, image, shape, rng)))
    monkeypatch.setattr(embedded, "draw_distractor", lambda image, shape, rng: (
        distractors.append(coverage_box(real_distractor, image, shape, rng)),
        sizes.append(image.shape[1::-1])))
    monkeypatch.setattr(embedded, "ThreadPoolExecutor", lambda workers: ThreadPoolExecutor(1))
    root = embedded.generate(str(tmp_path / "hard"), seed=5, num_train=16, num_val=0,
                             image_size=128, preset="hard")
    records = VOCDataset(root, "train").records
    boxes = np.concatenate([r.boxes for r in records])
    outer, half, inner = np.array(extents, dtype=boxes.dtype).transpose(1, 0, 2)
    assert boxes.shape == half.shape and (boxes == half).all(axis=1).mean() > 0.97
    assert np.all(boxes[:, :2] >= outer[:, :2]) and np.all(boxes[:, :2] <= inner[:, :2])
    assert np.all(boxes[:, 2:] <= outer[:, 2:]) and np.all(boxes[:, 2:] >= inner[:, 2:])
    distractors = [extent[1] for extent in distractors]
    assert len(distractors) >= 16 and not {tuple(d) for d in distractors} & {
        tuple(b) for b in boxes.astype(int)}
    assert len({size for size in map(tuple, sizes)}) > 8
    assert any(r.width < r.height for r in records) and any(r.width > r.height for r in records)
    for record in records:
        assert record.boxes.min() >= 0
        assert np.all(record.boxes[:, [0, 2]] <= record.width - 1)
        assert np.all(record.boxes[:, [1, 3]] <= record.height - 1)
    edge = [r for r in records if (r.boxes[:, 2] == r.width - 1).any()
            or (r.boxes[:, 3] == r.height - 1).any()]
    assert edge  # some object reaches the right or bottom edge: the clipped case
