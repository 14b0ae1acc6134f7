"""The generated shapes dataset: deterministic, idempotent, learnable, a real VOC folder."""
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from zoo.data import VOCDataset, embedded
from zoo.errors import DataError

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
