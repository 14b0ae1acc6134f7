"""Training on tiles (zoo.data.tiles, ``zoo train --tiles``): photos cut into the windows
``zoo detect --tiles`` runs, boxes clipped to each window (kept when at least MIN_KEPT of
them is inside) and mapped back exactly, every photo seen every epoch.

The data is none the zoo made: a COCO file at its own path, 1600x1200 JPEG photos of a
textured background with small dark "birds" (class ``bird``, COCO id 16); its writer
(:func:`write_birds`) serves the tiled training tests too."""
import json
import os

import cv2
import numpy as np
import pytest

from zoo.data import COCODataset
from zoo.data.tiles import DEFAULT_EMPTY_TILES, MIN_KEPT, TiledDataset, Tiling, windows
from zoo.jobs.train import build_train_model, training_items, training_loader
from zoo.jobs.train_options import TrainOptions

BIRD_ID = 16
WIDTH, HEIGHT = 1600, 1200
BIRD_COLOR = (30, 20, 10)
TILE = 400
CUT_BIRD = (370, 500, 430, 540)
"""A bird of the first photo across inner edges of the 400-pixel grid (tiles start at 0,
300, 600, ... along x, 0, 266, 533, 800 along y): the tile at (0, 266) holds half of it
(kept, clipped at x 400), the one at (300, 266) all of it, those at y 533 7/40 or less."""


def photo(seed, birds):
    """A textured RGB photo with the ``birds`` (pixel boxes, x2 and y2 excluded) drawn dark."""
    rng = np.random.RandomState(seed)
    coarse = rng.randint(90, 200, (HEIGHT // 40, WIDTH // 40, 3)).astype(np.uint8)
    image = cv2.resize(coarse, (WIDTH, HEIGHT), interpolation=cv2.INTER_LINEAR)
    for x1, y1, x2, y2 in birds:
        image[y1:y2, x1:x2] = BIRD_COLOR
    return image


def random_birds(rng, count):
    """``count`` birds of 24-64 pixels (1.5-4% of the long side), apart from each other."""
    birds = []
    while len(birds) < count:
        w, h = rng.randint(24, 64, 2)
        x, y = rng.randint(0, WIDTH - w), rng.randint(0, HEIGHT - h)
        box = (int(x), int(y), int(x + w), int(y + h))
        if all(box[2] + 20 < b[0] or b[2] + 20 < box[0] or box[3] + 20 < b[1]
               or b[3] + 20 < box[1] for b in birds):
            birds.append(box)
    return birds


def write_birds(folder, name, count, seed, first=(), empty=()):
    """``folder/name.json``, a COCO file of ``count`` photos ``folder/photos/name_K.jpg``,
    1-3 random birds each; the first photo also has the birds ``first``; the photos of
    indices ``empty`` none. Returns the file and ``{file name: birds}``."""
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(folder, "photos"), exist_ok=True)
    images, annotations, truth = [], [], {}
    for index in range(count):
        birds = [] if index in empty else random_birds(rng, rng.randint(1, 4))
        if index == 0:
            birds = list(first) + [b for b in birds if all(
                b[2] + 20 < f[0] or f[2] + 20 < b[0] or b[3] + 20 < f[1] or f[3] + 20 < b[1]
                for f in first)]
        file_name = "%s_%d.jpg" % (name, index)
        cv2.imwrite(os.path.join(folder, "photos", file_name),
                    photo(seed * 1000 + index, birds)[:, :, ::-1],
                    [cv2.IMWRITE_JPEG_QUALITY, 95])
        images.append({"id": index + 1, "file_name": file_name, "width": WIDTH,
                       "height": HEIGHT})
        for x1, y1, x2, y2 in birds:
            annotations.append({"id": len(annotations) + 1, "image_id": index + 1,
                                "category_id": BIRD_ID, "bbox": [x1, y1, x2 - x1, y2 - y1],
                                "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
        truth[file_name] = birds
    path = os.path.join(folder, name + ".json")
    with open(path, "w") as stream:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": BIRD_ID, "name": "bird"}]}, stream)
    return path, truth


@pytest.fixture(scope="module")
def birds(tmp_path_factory):
    """The training file: 4 photos, the first with :data:`CUT_BIRD`, the last without birds."""
    folder = str(tmp_path_factory.mktemp("birds"))
    path, truth = write_birds(folder, "train", 4, seed=1, first=[CUT_BIRD], empty=(3,))
    return COCODataset(path, os.path.join(folder, "photos")), truth


def intersection(box, window):
    x1, y1 = max(box[0], window[0]), max(box[1], window[1])
    x2, y2 = min(box[2], window[2]), min(box[3], window[3])
    return (x1, y1, x2, y2) if x2 > x1 and y2 > y1 else None


def area(box):
    return (box[2] - box[0]) * (box[3] - box[1])


def test_a_cut_box_is_clipped_to_each_tile_and_maps_back_exactly(birds):
    dataset, _ = birds
    tiled = TiledDataset(dataset, Tiling(TILE))
    kept, cut_away, parts = 0, 0, []
    for index in np.flatnonzero(tiled.photos == 0):
        window = tiled.windows[index]
        record = tiled.records[index]
        x0, y0 = window[:2]
        back = [tuple(box) for box in record.boxes + [x0, y0, x0, y0]]
        part = intersection(CUT_BIRD, window)
        if part is None or area(part) < MIN_KEPT * area(CUT_BIRD):
            assert part not in back
            cut_away += part is not None
            continue
        # The tile's label holds exactly the bird's part inside it, in the tile's pixels...
        assert back.count(part) == 1
        kept += 1
        parts.append(part)
        # ... and the tile's pixels there are the bird's (JPEG blurs its edge a little).
        image, label = tiled[index]
        assert image.shape[:2] == (window[3] - window[1], window[2] - window[0])
        x1, y1, x2, y2 = (np.asarray(part) - [x0, y0, x0, y0]).astype(int)
        inner = image[y1 + 2:y2 - 2, x1 + 2:x2 - 2].reshape(-1, 3).mean(axis=0)
        np.testing.assert_allclose(inner, BIRD_COLOR, atol=12)
        np.testing.assert_array_equal(label[:, 1:5], record.boxes)
        assert (label[:, 0] == 0).all()
    # The tiles holding all or half of the bird keep it; 7/40 is not. The whole photo is
    # not trained: every box of it lies whole in a tile, which shows it larger.
    assert kept == 2 and cut_away == 2
    assert (0, 0, WIDTH, HEIGHT) not in tiled.windows
    assert (CUT_BIRD[0], CUT_BIRD[1], TILE, CUT_BIRD[3]) in parts  # clipped at the edge
    # Its parts merged back are the bird.
    merged = tuple(float(f(values)) for f, values in zip(
        (min, min, max, max), zip(*parts)))
    assert merged == CUT_BIRD
    assert CUT_BIRD in parts  # the tile at (300, 266) holds it whole


def test_every_photo_is_seen_every_epoch_with_the_stated_share_of_empty_tiles(birds):
    dataset, truth = birds
    options = TrainOptions(network="ssd_mobilenetv2_stride8", data_shape=192, batch_size=4,
                           tiles=TILE, data_threads=1, max_expand=1.0)
    model = build_train_model(options, dataset.class_names)
    loader = training_loader(options, model, training_items(options, dataset))
    tiled = loader.dataset
    assert isinstance(tiled, TiledDataset)
    # Windows are the tiles zoo detect --tiles runs (its whole-photo pass not trained: every
    # bird lies whole in a tile).
    assert len(tiled) == len(dataset) * (len(windows(WIDTH, HEIGHT, Tiling(TILE))) - 1)
    boxed = set(tiled.boxed.tolist())
    empties = int(round(DEFAULT_EMPTY_TILES * len(boxed)))
    drawn = []
    for epoch in range(3):
        seen = [int(index) for batch in loader.epoch(epoch)
                for index in batch.indices[:len(batch.indices) - batch.pad]]
        assert len(seen) == len(set(seen)) == len(boxed) + empties
        assert boxed <= set(seen)  # every window with a box, every epoch
        assert set(tiled.photos[seen]) == set(range(len(dataset)))  # and every photo
        assert len(dataset.records[3].boxes) == 0 and 3 in set(tiled.photos[seen])
        drawn.append(sorted(set(seen) - boxed))
    assert drawn[0] != drawn[1] or drawn[1] != drawn[2]  # empty tiles drawn afresh
    assert len(loader) == -(-(len(boxed) + empties) // 4)  # the last batch filled, not dropped


def test_the_whole_photo_is_trained_only_for_a_box_no_tile_holds_whole(tmp_path):
    # A bird of 500x300 pixels is larger than a 400-pixel tile's overlap: no tile holds it
    # whole, so the whole photo (its only whole view, as in tiled detection) is trained; the
    # other photos' small birds each lie whole in a tile, and their whole photos are not.
    large = (300, 200, 800, 500)
    path, _ = write_birds(str(tmp_path), "train", 3, seed=2, first=[large])
    dataset = COCODataset(path, os.path.join(str(tmp_path), "photos"))
    options = TrainOptions(network="ssd_mobilenetv2_stride8", data_shape=192, batch_size=4,
                           tiles=TILE, data_threads=1, max_expand=1.0)
    tiled = training_items(options, dataset)
    whole = [(int(photo), record) for photo, window, record in zip(
        tiled.photos, tiled.windows, tiled.records) if window == (0, 0, WIDTH, HEIGHT)]
    assert [photo for photo, _ in whole] == [0]
    assert large in [tuple(box) for box in whole[0][1].boxes]
    assert tiled.whole_photos() == 1
