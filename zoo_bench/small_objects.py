"""Small objects in large photos: a seeded generator of bird photos, a scorer, and the
recipe that trains a detector on them (``zoo benchmark-small-objects``).

The photos (:func:`generate`) are what issue 48 tried the zoo on, made on the fly from the
seed: a cluttered natural-looking background (a crop of one of the shapes dataset's photos
or terrain textures, :func:`zoo.data.embedded.background`, under a sky gradient and
foliage-like clusters of leaves), distractors of other shapes and colours that are not the
class (:data:`zoo.data.embedded.DISTRACTORS` and the shapes classes), and 1-6 birds
(:func:`draw_bird`: a body, head, beak, tail and folded or spread wings, turned and
mirrored) each 1-5% of the photo's long side and standing out from the ground it covers as
real birds do (:data:`MIN_CONTRAST`), then relit (:func:`zoo.data.embedded.relight`).
One class, ``bird``, COCO id 16. Every split is a folder of JPEGs and a COCO file of its
own, ``WORK_DIR/SPLIT.json`` (``file_name`` relative to ``WORK_DIR/SPLIT``), boxes in the
frame a viewer shows; every second photo of a split is stored turned with an EXIF
orientation (6 or 8) so that a viewer shows it upright, as a phone stores photos.

The benchmark (:func:`benchmark_small_objects`) runs the recipe of docs/training.md
("Small objects in large photos") as a user types it, each command a fresh ``zoo``
process: ``zoo check-data``, ``zoo train --tiles`` with the config's anchors from the
detector ``make demo`` trains (``--init-from``), ``zoo eval`` on the held-out whole photos
(through the artifact's tiles), ``zoo detect --crops`` on the 4000x3000 test photos scored
with pycocotools (:func:`score_detections`); beside it the same from random weights, with
fitted anchors and on whole photos (:data:`VARIANTS`). One table.
"""
import json
import os
import shlex
import subprocess
import sys
import time

import cv2
import numpy as np
from PIL import Image

from zoo.data import embedded
from zoo.errors import OptionsError
from zoo_bench import child_environment
from zoo_bench.options import SmallObjectsBenchmarkOptions

__all__ = ["CATEGORY", "SmallObjectsBenchmarkOptions", "benchmark_small_objects", "draw_bird",
           "draw_photo", "generate", "generate_split", "report", "score_detections"]

CATEGORY = {"id": 16, "name": "bird", "supercategory": "animal"}
"""The one class, with COCO's id for birds."""
BIRDS = (1, 6)
"""Fewest and most birds a photo."""
BIRD_SIDES = (0.01, 0.05)
"""A bird's larger side, as a share of the photo's long side."""
DISTRACTORS = (2, 8)
"""Fewest and most shapes of no class a photo, sized as the birds."""
DISTRACTOR_SIDES = (0.01, 0.06)
MAX_COVERED = 0.1
"""Largest share of either box a bird and another object may share."""
TURNED = (6, 8)
"""EXIF orientations the odd photos of a split are stored with, in turn."""
SUPERSAMPLE = 4
"""A bird is drawn at this many times its size, then shrunk: antialiased edges."""
MIN_CONTRAST = 80
"""Least difference (of 255) between a bird's body luminance and the mean of the background
it covers: birds stand out as real ones do against sky, foliage or ground (version 1 drew
brown birds on brown ground at any contrast; hand-cut tiles around them taught the SSD
nothing in 8 epochs, VOC07 0.04)."""
GENERATOR_VERSION = 2
"""Bump when the drawing changes, so that existing folders are made again."""


def generate_split(work_dir, split, count, size, seed):
    """``count`` photos of ``size`` (width, height, as shown) in ``work_dir/split`` and their
    COCO file ``work_dir/split.json``, made unless the file records these settings; returns
    the COCO file's path."""
    path = os.path.join(work_dir, split + ".json")
    settings = {"generator": GENERATOR_VERSION, "split": split, "count": count,
                "size": list(size), "seed": seed}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as stream:
            if json.load(stream).get("info", {}).get("settings") == settings:
                return path
    folder = os.path.join(work_dir, split)
    os.makedirs(folder, exist_ok=True)
    images, annotations = [], []
    for index in range(count):
        rng = np.random.RandomState([seed, sum(map(ord, split)), index])
        image, boxes = draw_photo(rng, *size)
        name = "%s_%04d.jpg" % (split, index)
        write_photo(os.path.join(folder, name), image, TURNED[index // 2 % 2] if index % 2
                    else 1)
        images.append({"id": index + 1, "file_name": name, "width": size[0],
                       "height": size[1]})
        for x1, y1, x2, y2 in boxes:
            annotations.append({"id": len(annotations) + 1, "image_id": index + 1,
                                "category_id": CATEGORY["id"], "iscrowd": 0,
                                "bbox": [x1, y1, x2 - x1 + 1, y2 - y1 + 1],
                                "area": (x2 - x1 + 1) * (y2 - y1 + 1)})
    coco = {"info": {"description": "zoo_bench.small_objects", "settings": settings},
            "images": images, "annotations": annotations, "categories": [CATEGORY]}
    with open(path + ".tmp", "w", encoding="utf-8") as stream:
        json.dump(coco, stream)
    os.replace(path + ".tmp", path)  # written last: a half-made split is made again
    return path


def write_photo(path, image, orientation):
    """Save ``image`` (the frame a viewer shows) as JPEG, stored turned back from it with
    EXIF ``orientation`` where that is not 1 (:func:`zoo.data.orientation.orient` undoes
    it)."""
    exif = Image.Exif()
    if orientation != 1:
        # orient() turns 6 by rot90(-1) and 8 by rot90(+1): store the inverse turn.
        image = np.rot90(image, 1 if orientation == 6 else -1)
        exif[0x0112] = orientation
    Image.fromarray(np.ascontiguousarray(image)).save(path, quality=embedded.JPEG_QUALITY,
                                                      exif=exif.tobytes())


def draw_photo(rng, width, height):
    """A ``width`` x ``height`` RGB photo and its birds' inclusive pixel boxes
    ``[(x1, y1, x2, y2)]``."""
    long_side = max(width, height)
    image = sky(rng, embedded.background(rng, (width, height), clutter=True))
    foliage(rng, image)
    taken, boxes = [], []
    for _ in range(rng.randint(DISTRACTORS[0], DISTRACTORS[1] + 1)):
        place = embedded.place_distractor if rng.uniform() < 0.7 else embedded.place_shape
        shape = place(rng, long_side, taken, DISTRACTOR_SIDES, (width, height), MAX_COVERED)
        if shape is not None:
            taken.append(shape["box"])
            (embedded.draw_shape if "class_id" in shape else embedded.draw_distractor)(
                image, shape, rng)
    for _ in range(rng.randint(BIRDS[0], BIRDS[1] + 1)):
        box = draw_bird(rng, image, rng.uniform(*BIRD_SIDES) * long_side, taken)
        if box is not None:
            taken.append(box)
            boxes.append(box)
    return embedded.relight(image, rng), boxes


def sky(rng, image):
    """In half of the photos, a blue-grey sky gradient blended over the top part."""
    if rng.uniform() < 0.5:
        return image
    height = image.shape[0]
    horizon = rng.uniform(0.3, 0.8) * height
    weight = np.clip(1 - np.arange(height, dtype=np.float32) / horizon, 0, 1) ** 0.7
    colour = np.float32([rng.uniform(120, 200), rng.uniform(150, 215), rng.uniform(190, 250)])
    blend = rng.uniform(0.5, 0.9) * weight[:, None, None]
    return (image * (1 - blend) + colour * blend).astype(np.uint8)


def foliage(rng, image):
    """0-4 clusters of leaves (green to brown ellipses about a small bird's size), drawn in
    place: clutter a detector must not take for birds."""
    height, width = image.shape[:2]
    long_side = max(width, height)
    for _ in range(rng.randint(0, 5)):
        centre = rng.uniform(0, 1, 2) * (width, height)
        spread = rng.uniform(0.03, 0.12) * long_side
        hue = rng.randint(25, 75)
        for _ in range(rng.randint(30, 120)):
            x, y = rng.normal(centre, spread)
            axes = rng.uniform(0.002, 0.008) * long_side * np.float32([1, rng.uniform(0.3, 0.6)])
            hsv = np.uint8([[[hue + rng.randint(-10, 11), rng.randint(80, 220),
                              rng.randint(40, 180)]]])
            colour = tuple(int(c) for c in cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0])
            cv2.ellipse(image, (int(x), int(y)), tuple(int(max(1, a)) for a in axes),
                        rng.uniform(0, 180), 0, 360, colour, -1, cv2.LINE_AA)


def bird_parts(rng):
    """A bird's body and wing polygons in units of its length, facing right: ``(body,
    wings)``, each a list of Nx2 arrays. Half of the birds fly (wings spread up and down),
    the others perch (a wing folded on the body)."""
    length, depth = 1.0, rng.uniform(0.18, 0.3)
    head = rng.uniform(0.07, 0.11)

    def ellipse(cx, cy, ax, ay, angle=0):
        return cv2.ellipse2Poly((int(cx * 1000), int(cy * 1000)), (int(ax * 1000),
                                int(ay * 1000)), int(angle), 0, 360, 15) / 1000.0

    body = [ellipse(0, 0, 0.32 * length, depth / 2),
            ellipse(0.3, -depth * 0.35, head, head),
            np.array([[0.3 + head * 0.8, -depth * 0.45], [0.3 + head + rng.uniform(0.05, 0.14),
                      -depth * 0.3], [0.3 + head * 0.8, -depth * 0.15]]),
            np.array([[-0.28, 0], [-0.5, -rng.uniform(0.03, 0.09)],
                      [-0.5, rng.uniform(0.03, 0.09)]])]
    if rng.uniform() < 0.5:
        wings = [ellipse(-0.05, -0.02, 0.22, depth * 0.3, rng.uniform(-8, 8))]
    else:
        span = rng.uniform(0.3, 0.6)
        wings = [np.array([[-0.12, 0], [0.12, 0], [rng.uniform(-0.3, 0.1), -sign * span]])
                 for sign in (1, -1 if rng.uniform() < 0.5 else 1)]
    return body, wings


def draw_bird(rng, image, extent, taken):
    """Draw a bird whose larger side is ``extent`` pixels at a place overlapping the
    ``taken`` boxes little; its inclusive pixel box, or None where no place is found."""
    height, width = image.shape[:2]
    body, wings = bird_parts(rng)
    angle = np.radians(rng.uniform(-30, 30))
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    mirror = np.array([-1.0, 1.0]) if rng.uniform() < 0.5 else np.ones(2)
    parts = [[(p * mirror) @ turn.T for p in group] for group in (body, wings)]
    every = np.concatenate(parts[0] + parts[1])
    low, scale = every.min(axis=0), extent / np.ptp(every, axis=0).max()
    span = np.ptp(every, axis=0) * scale
    for _ in range(embedded.PLACEMENT_TRIES):
        corner = np.floor(rng.uniform(0, 1, 2) * (np.array([width, height]) - span - 2))
        box = (corner[0], corner[1], corner[0] + span[0], corner[1] + span[1])
        if all(embedded.covered_fraction(box, other) <= MAX_COVERED for other in taken):
            break
    else:
        return None
    size = (int(np.ceil(span[0])) + 2, int(np.ceil(span[1])) + 2)
    masks = []
    for group in parts:
        mask = np.zeros((size[1] * SUPERSAMPLE, size[0] * SUPERSAMPLE), np.uint8)
        polygons = [np.round(((p - low) * scale + 1) * SUPERSAMPLE * 16).astype(np.int32)
                    for p in group]
        cv2.fillPoly(mask, polygons, 255, lineType=cv2.LINE_AA, shift=4)
        masks.append(cv2.resize(mask, size, interpolation=cv2.INTER_AREA)
                     .astype(np.float32)[:, :, None] / 255)
    left, top = int(corner[0]), int(corner[1])
    patch = image[top:top + size[1], left:left + size[0]].astype(np.float32)
    colour, wing_colour = bird_colours(rng, luminance(patch[masks[0][:, :, 0] >= 0.5]
                                                      .mean(axis=0)))
    patch = patch * (1 - masks[0]) + colour * masks[0]
    patch = patch * (1 - masks[1]) + wing_colour * masks[1]
    image[top:top + size[1], left:left + size[0]] = np.clip(patch, 0, 255).astype(np.uint8)
    ys, xs = np.nonzero(np.maximum(masks[0], masks[1])[:, :, 0] >= 0.5)
    return (int(xs.min()) + left, int(ys.min()) + top, int(xs.max()) + left,
            int(ys.max()) + top)


def luminance(rgb):
    """The luminance (Rec. 601) of RGB values, ``(..., 3)``."""
    return np.asarray(rgb, np.float32) @ np.float32([0.299, 0.587, 0.114])


def bird_colours(rng, background):
    """A bird's body and wing colours (RGB floats) on a background of luminance
    ``background``: dark, brown or, in one of five, bright; the body at least
    :data:`MIN_CONTRAST` darker or lighter than the background (darker on a light one), the
    wings darker than the body."""
    kind = rng.uniform()
    if kind < 0.4:
        body = np.float32([rng.randint(15, 80)] * 3) + rng.randint(0, 15, 3)
    else:
        hue = rng.randint(8, 28) if kind < 0.8 else rng.randint(180)
        saturation = rng.randint(60, 200) if kind < 0.8 else rng.randint(150, 256)
        hsv = np.uint8([[[hue, saturation, rng.randint(70, 220)]]])
        body = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0].astype(np.float32)
    if abs(luminance(body) - background) < MIN_CONTRAST:
        # scaled towards black or white, its hue kept, until it stands out
        if background >= 128:
            body = body * max(background - MIN_CONTRAST, 0) / max(luminance(body), 1)
        else:
            body = 255 - (255 - body) * (255 - min(background + MIN_CONTRAST, 255)) \
                / max(255 - luminance(body), 1)
    return body, body * rng.uniform(0.45, 0.85)


def score_detections(ground_truth, results):
    """COCO stats (``AP``, ``AP50``, ``APs``, ...) of a ``zoo detect`` run's results.json
    (path or dict) against the COCO file ``ground_truth`` of the same photos, each photo
    matched by file name, each detection's box ``[x1, y1, x2, y2]`` in the shown frame, with
    the zoo's metric code (:func:`zoo.metrics.coco.coco_evaluator`, pycocotools)."""
    from zoo.metrics.coco import COCO_STAT_NAMES, coco_evaluator, corners_to_xywh
    with open(ground_truth, encoding="utf-8") as stream:
        truth = json.load(stream)
    if not isinstance(results, dict):
        with open(results, encoding="utf-8") as stream:
            results = json.load(stream)
    ids = {image["file_name"]: image["id"] for image in truth["images"]}
    detections = []
    for entry in results["images"]:
        name = os.path.basename(entry["file"])
        if name not in ids:
            raise OptionsError("%s: a photo the ground truth %s does not list"
                               % (entry["file"], ground_truth))
        detections.extend({"image_id": ids[name], "category_id": row["category_id"],
                           "bbox": corners_to_xywh(row["box"]), "score": row["score"]}
                          for row in entry["detections"])
    evaluator = coco_evaluator(truth, detections)
    return dict(zip(COCO_STAT_NAMES, (float(v) for v in evaluator.stats)))


VARIANTS = ("recipe", "scratch", "fitted", "whole")
"""The runs of the table, each the recipe with one thing changed: ``recipe`` (tiles, the
config's anchors, from ``--init-from``: make demo's detector), ``scratch`` (the same from
random weights; only where the recipe has a start), ``fitted`` (with ``--fit-anchors``),
``whole`` (whole photos): what each brings. Fitted anchors measured worse than the config's
on these photos (docs/training.md), so the recipe leaves them out."""


def generate(options):
    """The options' three splits in ``work_dir``: ``{split: COCO file}``."""
    train_size, test_size = (options.width, options.height), (options.test_width,
                                                              options.test_height)
    return {split: generate_split(options.work_dir, split, count, size, options.seed)
            for split, count, size in (("train", options.train_images, train_size),
                                       ("val", options.val_images, train_size),
                                       ("test", options.test_images, test_size))}


def data_flags(options):
    """The flags naming the generated COCO data, as a user types them."""
    return ["--dataset", "coco", "--annotations", os.path.join(options.work_dir,
                                                               "{split}.json"),
            "--image-dir", os.path.join(options.work_dir, "{split}")]


def train_flags(options, variant):
    """``zoo train``'s flags of one variant of :data:`VARIANTS` (the recipe's: tiles, the
    config's anchors, ``--init-from`` unless the options start from random weights)."""
    flags = ["--network", options.network, *data_flags(options), "--max-expand", "1",
             "--batch-size", options.batch_size, "--data-shape", options.data_shape,
             "--seed", options.seed]
    if variant != "whole":
        flags += ["--tiles", options.tiles]
    if variant != "scratch" and not options.from_scratch:
        flags += ["--init-from", options.init_from]
    if variant == "fitted":
        flags += ["--fit-anchors"]
    if options.lr is not None:
        flags += ["--lr", options.lr]
    return flags


def run_zoo(argv, log, output):
    """``zoo ARGV`` in a fresh process, its output kept in the file ``output``: ``(that
    output, wall seconds)``; a failure is one line naming the command and the file."""
    argv = [str(value) for value in argv]
    log("$ zoo " + shlex.join(argv))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "zoo", *argv],
                          env=child_environment(), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    text = done.stdout + done.stderr
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, "w", encoding="utf-8") as stream:
        stream.write(text)
    if done.returncode != 0:
        lines = text.strip().splitlines() or ["exit %d" % done.returncode]
        raise OptionsError("zoo %s failed (its output: %s): %s" % (argv[0], output, lines[-1]))
    return text, seconds


def logs(options, variant, step):
    """The file keeping the output of one command of the benchmark."""
    return os.path.join(options.work_dir, "logs", "%s-%s.log" % (variant, step))


def run_variant(options, variant, log):
    """Train, evaluate and detect with one variant: its row of figures."""
    epochs = options.epochs if variant == "recipe" else options.baseline_epochs
    folder = os.path.join(options.work_dir, "models", variant)
    prefix = os.path.join(folder, options.network)
    _, train_s = run_zoo(["train", *train_flags(options, variant), "--epochs", epochs,
                          "--val-interval", epochs, "--output-dir", folder,
                          "--no-progress"], log, logs(options, variant, "train"))
    scores = os.path.join(options.work_dir, "scores", variant + "-val.json")
    run_zoo(["eval", "--checkpoint", prefix, *data_flags(options), "--split", "val",
             "--output", scores, "--no-progress"], log, logs(options, variant, "eval"))
    with open(scores, encoding="utf-8") as stream:
        held_out = json.load(stream)
    found = os.path.join(options.work_dir, "detect", variant)
    run_zoo(["detect", "--checkpoint", prefix, os.path.join(options.work_dir, "test"),
             "--output", found, "--crops", "--exist-ok", "--no-progress"], log,
            logs(options, variant, "detect"))
    results = os.path.join(found, "results.json")
    with open(results, encoding="utf-8") as stream:
        crops = sum(len(entry["detections"]) for entry in json.load(stream)["images"])
    test = score_detections(os.path.join(options.work_dir, "test.json"), results)
    return {"variant": variant, "epochs": epochs, "train_s": train_s,
            "voc07": held_out["voc"]["voc07"]["mAP"], "val_ap": held_out["coco"]["AP"],
            "val_aps": held_out["coco"]["APs"], "test_ap": test["AP"],
            "test_ap50": test["AP50"], "test_aps": test["APs"], "crops": crops}


def census_lines(options, log):
    """``zoo check-data``'s census lines of the data at the recipe's input, whole photos
    (what the network would see untiled, and the advice)."""
    text, _ = run_zoo(["check-data", "--network", options.network, *data_flags(options),
                       "--data-shape", options.data_shape, "--batch-size",
                       options.batch_size, "--max-expand", "1",
                       "--output-dir", os.path.join(options.work_dir, "check-data")], log,
                      logs(options, "data", "check"))
    return [line for line in text.splitlines() if "census:" in line and "boxes at" in line
            or "warning: census" in line]


def benchmark_small_objects(options, log=print):
    """Generate the photos, then (unless ``generate_only``) the census and each variant of
    :data:`VARIANTS` (the baselines only with ``baseline_epochs``): ``(census lines,
    rows)``. ``log`` gets each command as it starts."""
    generate(options)
    if options.generate_only:
        return [], []
    census = census_lines(options, log)
    variants = [variant for variant in (VARIANTS if options.baseline_epochs else VARIANTS[:1])
                if not (variant == "scratch" and options.from_scratch)]
    return census, [run_variant(options, variant, log) for variant in variants]


def report(options, census, rows):
    """The table of :func:`benchmark_small_objects`' rows."""
    if options.generate_only:
        return "\n".join("%s: %s (photos under %s)" % (
            split, os.path.join(options.work_dir, split + ".json"),
            os.path.join(options.work_dir, split)) for split in ("train", "val", "test"))
    lines = ["%d training and %d held-out photos of %dx%d, %d test photos of %dx%d (birds "
             "%g-%g%% of the long side, %d-%d a photo; seed %d); %s at %d, batch %d" % (
                 options.train_images, options.val_images, options.width, options.height,
                 options.test_images, options.test_width, options.test_height,
                 100 * BIRD_SIDES[0], 100 * BIRD_SIDES[1], BIRDS[0], BIRDS[1], options.seed,
                 options.network, options.data_shape, options.batch_size)]
    lines += census
    lines.append("%-40s %6s %8s %9s %6s %6s %8s %9s %8s %6s" % (
        "run", "epochs", "train s", "VOC07 mAP", "AP", "APs", "test AP", "test AP50",
        "test APs", "crops"))
    start = "random start" if options.from_scratch else "--init-from"
    names = {"recipe": "tiles %d, %s" % (options.tiles, start),
             "scratch": "tiles %d, random start" % options.tiles,
             "fitted": "tiles %d, %s, --fit-anchors" % (options.tiles, start),
             "whole": "whole photos, %s" % start}
    for row in rows:
        lines.append("%-40s %6d %8.0f %9.3f %6.3f %6.3f %8.3f %9.3f %8.3f %6d" % (
            names[row["variant"]], row["epochs"], row["train_s"], row["voc07"], row["val_ap"],
            row["val_aps"], row["test_ap"], row["test_ap50"], row["test_aps"], row["crops"]))
    lines.append("VOC07 mAP, AP, APs: zoo eval of the held-out whole photos (in the "
                 "artifact's tiles); test: zoo detect --crops on the %dx%d photos at its "
                 "default threshold, scored with pycocotools; train s: wall time of zoo "
                 "train (validation once, at the end)" % (options.test_width,
                                                         options.test_height))
    return "\n".join(lines)
