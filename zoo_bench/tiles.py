"""AP of tiled detection against the whole-photo pass, on large photos of small objects.

Generates a VOC folder of large photos (4000x3000 by default): a crop of one of the shapes
dataset's background photos (:func:`zoo.data.embedded.photos`) blown up to the photo's size,
with a few dozen shapes of the shapes classes drawn as the shapes dataset draws them, but
each only 1-5% of the photo's longer side (the dataset's are 15-50% of its side). A
detector trained on the shapes dataset (``make demo``'s) then runs over it whole and with
each tile size (:mod:`zoo.inference.tiles`), and each run is scored as ``zoo eval`` scores
a split: COCO AP (with AP by object area; COCO's "small" is under 32x32 pixels) and VOC07
mAP. The photos and shapes depend on the seed alone, so the table is the same every run.
"""
import json
import os
from dataclasses import asdict

import cv2
import numpy as np
from PIL import Image

from zoo.checkpoint import open_detector
from zoo.data import embedded
from zoo.data.dataset import write_class_names
from zoo.data.factory import open_dataset
from zoo.data.voc import CLASS_FILE, annotation_xml
from zoo.inference.evaluation import coco_report, dataset_rows, voc_scores
from zoo.inference.tiles import tiling, windows

__all__ = ["benchmark_tiles", "draw_photo", "generate", "report"]

SPLIT = "val"
MANIFEST = "manifest.json"
SCORE_FLOOR = 0.01
"""The lowest score scored, as ``zoo eval`` keeps every box the graph gives (the shapes SSD's
own pre-NMS threshold is 0.01): AP needs the low-scoring boxes too."""


def generate(options):
    """Write the VOC folder of ``options`` into its ``work_dir`` (unless it holds this one
    already) and return its root."""
    root = os.path.join(options.work_dir, "photos")
    manifest = {key: value for key, value in asdict(options).items()
                if key in ("num_images", "width", "height", "object_sides", "objects", "seed")}
    manifest = json.loads(json.dumps(manifest))  # tuples as lists, as read back
    if embedded.read_manifest(root) == manifest:
        return root
    for folder in ("Annotations", "JPEGImages", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    image_ids = ["%06d" % index for index in range(options.num_images)]
    for index, image_id in enumerate(image_ids):
        write_photo(root, image_id, np.random.RandomState([options.seed, index]), options)
    embedded.write_image_set(root, SPLIT, image_ids)
    write_class_names(os.path.join(root, CLASS_FILE), embedded.CLASSES)
    embedded.write_manifest(root, manifest)
    return root


def write_photo(root, image_id, rng, options):
    """Draw one photo; write it as JPEG with its VOC annotation."""
    image, objects = draw_photo(rng, options.width, options.height, options.object_sides,
                                options.objects)
    Image.fromarray(image).save(os.path.join(root, "JPEGImages", image_id + ".jpg"), "JPEG",
                                quality=embedded.JPEG_QUALITY)
    xml = annotation_xml(image_id + ".jpg", options.width, options.height,
                         [(embedded.CLASSES[class_id], box, 0) for class_id, box in objects])
    with open(os.path.join(root, "Annotations", image_id + ".xml"), "w", encoding="utf-8") as f:
        f.write(xml)


def draw_photo(rng, width, height, sides, count):
    """A ``width`` x ``height`` RGB photo with up to ``count`` shapes ``sides`` (least, most)
    of its longer side, and their ``[(class_id, inclusive pixel box)]``."""
    image = background(rng, width, height)
    objects, placed = [], []
    for _ in range(count):
        shape = embedded.place_shape(rng, max(width, height), placed, sides, (width, height))
        if shape is not None:
            embedded.draw_shape(image, shape, rng)
            placed.append(shape["box"])
            objects.append((shape["class_id"], shape_box(shape)))
    return image, objects


def background(rng, width, height):
    """A random crop of a background photo of the photo's aspect, resized to it."""
    photo = embedded.photos()[rng.randint(len(embedded.photos()))]
    rows, columns = photo.shape[:2]
    crop_w = min(columns, int(rows * width / height))
    crop_h = int(crop_w * height / width)
    top, left = rng.randint(rows - crop_h + 1), rng.randint(columns - crop_w + 1)
    return cv2.resize(photo[top:top + crop_h, left:left + crop_w], (width, height),
                      interpolation=cv2.INTER_LINEAR)


def shape_box(shape):
    """The shape's inclusive pixel box (:func:`zoo.data.embedded.pixel_box`), measured on a
    mask of the shape's own size rather than of the whole photo."""
    origin = np.floor(np.asarray(shape["box"][:2])).astype(int)
    side = int(np.ceil(max(shape["box"][2] - origin[0], shape["box"][3] - origin[1]))) + 2
    x1, y1, x2, y2 = embedded.pixel_box(dict(shape, points=shape["points"] - origin), side)
    return (x1 + origin[0], y1 + origin[1], x2 + origin[0], y2 + origin[1])


def benchmark_tiles(options, progress=True):
    """``[(setting, windows a photo, COCO stats, VOC07 mAP)]``: the whole-photo pass, then
    each tile size of ``options``."""
    dataset = open_dataset("voc", generate(options), SPLIT)
    detector = open_detector(options.checkpoint)
    settings = [None] + [tiling(size, options.tile_overlap) for size in options.tiles]
    results = []
    for tiles in settings:
        rows = [found[found[:, 1] >= SCORE_FLOOR] for found in dataset_rows(
            detector, dataset, options.batch_size, progress, tiles)]
        stats, _ = coco_report(dataset, rows)
        count = 1 if tiles is None else len(windows(options.width, options.height, tiles))
        results.append((tiles, count, stats, voc_scores(dataset, rows)["voc07"]["mAP"]))
    return results


def report(options, results):
    """The table of :func:`benchmark_tiles`' results."""
    objects = sum(len(record.boxes) for record in open_dataset(
        "voc", os.path.join(options.work_dir, "photos"), SPLIT).records)
    lines = ["%d photos of %dx%d, %d shapes of %g-%g%% of the longer side; %s" % (
        options.num_images, options.width, options.height, objects,
        100 * options.object_sides[0], 100 * options.object_sides[1], options.checkpoint),
        "%-26s %8s %6s %6s %6s %6s %6s %9s" % ("setting", "windows", "AP", "AP50", "APs",
                                              "APm", "APl", "VOC07 mAP")]
    for tiles, count, stats, voc in results:
        name = ("whole photo" if tiles is None
                else "tiles %d, overlap %g" % (tiles.size, tiles.overlap))
        lines.append("%-26s %8d %6.3f %6.3f %6.3f %6.3f %6.3f %9.3f" % (
            name, count, stats["AP"], stats["AP50"], stats["APs"], stats["APm"], stats["APl"],
            voc))
    lines.append("windows: passes of the network a photo (the whole photo and its tiles); "
                 "-1: no object of that area (COCO: small < 32x32 pixels, large > 96x96)")
    return "\n".join(lines)
