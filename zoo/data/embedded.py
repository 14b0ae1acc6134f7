"""A small, learnable detection dataset generated on the spot as a real VOC folder.

Each image is a random crop of a photo that ships with SciPy or Matplotlib,
with one to four outlined shapes drawn on it; the class is the shape (circle,
square, triangle, star), never the colour. Objects span 15-50% of the image
side and may overlap a little, but at most 35% of either box is covered.
A box is the shape's pixel extent, in VOC's inclusive convention: the first and
last pixel the antialiased shape covers at least half (OpenCV draws with pixel
centres at whole coordinates and widens antialiased edges, so the extent is
measured on a mask rather than computed from the outline's coordinates).
Image i is drawn from ``RandomState([seed, i])`` alone, so the same seed writes
byte-identical files and an image does not depend on the counts asked for.

That is the ``"shapes"`` preset, the default, which a short recipe learns to VOC07 mAP
~0.9. The ``"hard"`` preset (:data:`PRESETS`) leaves room below the ceiling: landscape and
portrait photos, smaller objects (6-30% of the long side), 2-10 of them overlapping more,
1-6 distractors drawn like the objects but of no class (ellipses, crosses, bars, irregular
polygons, strokes, letters), terrain textures and blended photos behind them, and changed
brightness, contrast, colour and light gradients, noise, blur and JPEG quality.
"""
import functools
import json
import os
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Tuple

import cv2
import numpy as np
from PIL import Image

from zoo.data.dataset import write_class_names
from zoo.data.records import data_error
from zoo.data.voc import CLASS_FILE, annotation_xml
from zoo.errors import OptionsError

__all__ = ["CLASSES", "DEFAULT_PRESET", "DISTRACTORS", "MAX_COVERED", "MAX_OBJECTS", "PRESETS",
           "Preset", "background", "covered_fraction", "default_root", "draw_distractor",
           "draw_image", "draw_shape", "frame_size", "generate", "photos", "pixel_box",
           "place_distractor", "place_shape", "relight", "render", "shrink", "textures",
           "write_image_set"]

CLASSES = ("circle", "square", "triangle", "star")
MANIFEST = "manifest.json"
JPEG_QUALITY = 90
"""The default preset's JPEG quality."""
GENERATOR_VERSION = 2
"""Bump when the drawing or the annotations change, so existing folders are regenerated."""


@dataclass(frozen=True)
class Preset:
    """How a dataset is drawn. Sizes are fractions of the image's long side, which is
    ``long_side`` times ``generate``'s ``image_size``; ``aspect`` is width / height (drawn
    log-uniformly: (1, 1) is square)."""
    objects: Tuple[int, int]
    """Fewest and most objects an image gets (fewer only where one finds no room)."""
    extent: Tuple[float, float]
    """An object's larger box side, as a fraction of the image's long side."""
    max_covered: float
    """Largest fraction of either box that two boxes (object or distractor) may share."""
    long_side: Tuple[float, float] = (1.0, 1.0)
    aspect: Tuple[float, float] = (1.0, 1.0)
    distractors: Tuple[int, int] = (0, 0)
    """Fewest and most shapes of no class (:data:`DISTRACTORS`), drawn like the objects."""
    clutter: bool = False
    """Textures and blended photos behind, and :func:`relight` over, the drawing."""
    jpeg_quality: Tuple[int, int] = (90, 90)
    revision: int = 1
    """Bump when this preset's drawing changes, so its folders are regenerated (every
    preset's manifest records its settings but the default's, which predates presets:
    bump :data:`GENERATOR_VERSION` for the default)."""


PRESETS = {
    "shapes": Preset(objects=(1, 4), extent=(0.15, 0.5), max_covered=0.35,
                     jpeg_quality=(JPEG_QUALITY, JPEG_QUALITY)),
    "hard": Preset(objects=(2, 10), extent=(0.06, 0.3), max_covered=0.45, long_side=(1.0, 1.25),
                   aspect=(3 / 4, 16 / 9), distractors=(1, 6), clutter=True,
                   jpeg_quality=(60, 90)),
}
"""The settings ``generate`` draws by (``preset=``): ``shapes`` (the default, what ``make
demo`` trains) and ``hard``, for accuracy work that must not reach the ceiling."""
DEFAULT_PRESET = "shapes"
MAX_OBJECTS = PRESETS[DEFAULT_PRESET].objects[1]
EXTENT_RANGE = PRESETS[DEFAULT_PRESET].extent
MAX_COVERED = PRESETS[DEFAULT_PRESET].max_covered
DISTRACTORS = ("ellipse", "cross", "bar", "polygon", "stroke", "letters")
"""Shapes of no class: an ellipse (axes 1:0.35-0.65), a plus-sign cross, a bar (sides
1:0.25-0.5), an irregular polygon of 5-8 corners, an open stroke of 2-4 points, 1-3 letters."""
LETTERS = "AEFHKLMNRVWXYZ"
"""Letters a distractor spells: none that reads as a circle, a square or a triangle."""
PLACEMENT_TRIES = 20
PHOTO_SIDE = 512
STAR_INNER_RADIUS = 0.45


def default_root(output_dir="output"):
    """Where the demo keeps the dataset: ``<output_dir>/shapes``."""
    return os.path.join(output_dir, "shapes")


def generate(root, seed=0, num_train=1500, num_val=200, image_size=256, preset=DEFAULT_PRESET):
    """Write the dataset to ``root`` (a VOC folder with ``train``, ``val`` and ``trainval``
    image sets and ``classes.txt``) and return ``root``. ``preset`` names how it is drawn
    (:data:`PRESETS`); ``image_size`` is the image side (``hard``: the shortest long side).

    Nothing is written if ``root`` already holds this seed, counts, size and preset; a
    folder generated with other settings is replaced; any other non-empty
    folder is left alone and raises :class:`DataError`.
    """
    if preset not in PRESETS:
        raise OptionsError("embedded preset %r: expected one of %s"
                           % (preset, ", ".join(PRESETS)))
    manifest = {"generator": __name__, "version": GENERATOR_VERSION, "seed": seed,
                "num_train": num_train, "num_val": num_val, "image_size": image_size,
                "classes": list(CLASSES)}
    if preset != DEFAULT_PRESET:  # the default's manifest stays as it was before presets
        manifest["preset"] = dict(asdict(PRESETS[preset]), name=preset)
        manifest = json.loads(json.dumps(manifest))  # tuples as the file reads them back
    if read_manifest(root) == manifest:
        return root
    clear_folder(root)
    for folder in ("Annotations", "JPEGImages", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    write_manifest(root, dict(manifest, complete=False))  # marks the folder as ours meanwhile
    image_ids = ["%06d" % index for index in range(num_train + num_val)]
    photos()  # load once before the threads share them
    if PRESETS[preset].clutter:
        textures()
    with ThreadPoolExecutor(os.cpu_count()) as pool:  # OpenCV and Pillow release the GIL
        list(pool.map(lambda index: write_example(root, image_ids[index], seed, index,
                                                  image_size, PRESETS[preset]),
                      range(len(image_ids))))
    write_image_set(root, "train", image_ids[:num_train])
    write_image_set(root, "val", image_ids[num_train:])
    write_image_set(root, "trainval", image_ids)
    write_class_names(os.path.join(root, CLASS_FILE), CLASSES)
    write_manifest(root, manifest)
    return root


def read_manifest(root):
    """The manifest of a generated folder, or None."""
    try:
        with open(os.path.join(root, MANIFEST), encoding="utf-8") as stream:
            return json.load(stream)
    except (OSError, ValueError):
        return None


def write_manifest(root, manifest):
    """Write the manifest (sorted keys, so the file is the same every time)."""
    with open(os.path.join(root, MANIFEST), "w", encoding="utf-8") as stream:
        json.dump(manifest, stream, sort_keys=True, indent=1)
        stream.write("\n")


def clear_folder(root):
    """Remove an earlier generation from ``root``; refuse to touch a folder we did not write."""
    if not os.path.isdir(root) or not os.listdir(root):
        return
    if read_manifest(root) is None:
        raise data_error(root, "exists and holds no generated dataset (no %s); refusing to "
                         "overwrite it" % MANIFEST)
    for folder in ("Annotations", "JPEGImages", "ImageSets"):
        shutil.rmtree(os.path.join(root, folder), ignore_errors=True)
    for name in (CLASS_FILE, MANIFEST):
        if os.path.exists(os.path.join(root, name)):
            os.remove(os.path.join(root, name))


def write_example(root, image_id, seed, index, size, preset=PRESETS[DEFAULT_PRESET]):
    """Draw image ``index`` of the dataset and write it as JPEG with its VOC annotation."""
    rng = np.random.RandomState([seed, index])
    image, objects = draw_image(rng, size, preset)
    low, high = preset.jpeg_quality
    quality = low if low == high else rng.randint(low, high + 1)
    Image.fromarray(image).save(os.path.join(root, "JPEGImages", image_id + ".jpg"), "JPEG",
                                quality=int(quality))
    xml = annotation_xml(image_id + ".jpg", image.shape[1], image.shape[0],
                         [(CLASSES[class_id], box, 0) for class_id, box in objects])
    with open(os.path.join(root, "Annotations", image_id + ".xml"), "w", encoding="utf-8") as f:
        f.write(xml)


def write_image_set(root, name, image_ids):
    """Write ``ImageSets/Main/<name>.txt``."""
    with open(os.path.join(root, "ImageSets", "Main", name + ".txt"), "w") as stream:
        stream.write("".join(image_id + "\n" for image_id in image_ids))


@functools.lru_cache(maxsize=1)
def photos():
    """The RGB photos backgrounds are cut from: a raccoon, a staircase, Grace Hopper."""
    import scipy.misc
    from matplotlib.cbook import get_sample_data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # scipy.misc photos are deprecated
        face, ascent = scipy.misc.face(), scipy.misc.ascent()
    hopper = cv2.imread(str(get_sample_data("grace_hopper.jpg", asfileobj=False)))
    return tuple(shrink(photo) for photo in (
        face, np.repeat(ascent.astype(np.uint8)[:, :, None], 3, axis=2),
        cv2.cvtColor(hopper, cv2.COLOR_BGR2RGB)))


def shrink(photo):
    """Scale a photo to a shorter side of ``PHOTO_SIDE`` once, so crops need only a fast
    linear resize (area resampling at odd ratios is ten times slower)."""
    scale = PHOTO_SIDE / min(photo.shape[:2])
    size = (round(photo.shape[1] * scale), round(photo.shape[0] * scale))
    return cv2.resize(photo, size, interpolation=cv2.INTER_AREA)


def draw_image(rng, size, preset=PRESETS[DEFAULT_PRESET]):
    """One RGB image and its objects ``[(class_id, (x1, y1, x2, y2))]``, each box the shape's
    inclusive pixel extent (see :func:`pixel_box`); the image is ``size`` x ``size`` for a
    square preset, else :func:`frame_size`. Distractors are drawn but never annotated."""
    frame = frame_size(rng, size, preset)
    long_side = max(frame)
    image = background(rng, frame, preset.clutter)
    objects, placed = [], []
    if not preset.clutter:  # each shape drawn as it is placed: the default's bytes depend on it
        for _ in range(rng.randint(preset.objects[0], preset.objects[1] + 1)):
            shape = place_shape(rng, long_side, placed, preset.extent, frame, preset.max_covered)
            if shape is not None:
                draw_shape(image, shape, rng)
                placed.append(shape["box"])
                objects.append((shape["class_id"], pixel_box(shape, frame)))
        return image, objects
    shapes = []
    for count, place in ((preset.objects, place_shape), (preset.distractors, place_distractor)):
        for _ in range(rng.randint(count[0], count[1] + 1)):
            shape = place(rng, long_side, placed, preset.extent, frame, preset.max_covered)
            if shape is not None:
                placed.append(shape["box"])
                shapes.append(shape)
    for index in rng.permutation(len(shapes)):  # distractors over and under objects alike
        shape = shapes[index]
        if "class_id" in shape:
            draw_shape(image, shape, rng)
            objects.append((shape["class_id"], pixel_box(shape, frame)))
        else:
            draw_distractor(image, shape, rng)
    return relight(image, rng), objects


def frame_size(rng, size, preset):
    """An image's ``(width, height)``: ``size`` square for a square preset (drawing nothing
    from ``rng``), else a long side of ``preset.long_side`` times ``size`` and a
    width / height drawn log-uniformly from ``preset.aspect``."""
    if preset.long_side == (1.0, 1.0) and preset.aspect == (1.0, 1.0):
        return (size, size)
    long_side = int(round(rng.uniform(*preset.long_side) * size))
    aspect = float(np.exp(rng.uniform(*np.log(preset.aspect))))
    if aspect >= 1:
        return (long_side, max(1, int(round(long_side / aspect))))
    return (max(1, int(round(long_side * aspect))), long_side)


def background(rng, size, clutter=False):
    """A random crop of a photo, possibly mirrored, resized to ``size`` (a side, or ``(width,
    height)``). ``clutter``: of a photo or a terrain texture (:func:`textures`), zoomed in
    further, and in two of five images blended with a second such crop."""
    width, height = (size, size) if np.isscalar(size) else size
    if not clutter:
        return crop(rng, photos()[rng.randint(len(photos()))], width, height, 0.35)
    sources = photos() + textures()
    image = crop(rng, sources[rng.randint(len(sources))], width, height, 0.2)
    if rng.uniform() < 0.4:
        other = crop(rng, sources[rng.randint(len(sources))], width, height, 0.2)
        alpha = rng.uniform(0.3, 0.6)
        image = cv2.addWeighted(image, 1 - alpha, other, alpha, 0)
    return image


def crop(rng, photo, width, height, smallest):
    """A random crop of ``photo`` of the shape ``width`` x ``height``, ``smallest`` to all of
    the largest such crop, resized to that size and mirrored half of the time."""
    photo_height, photo_width = photo.shape[:2]
    side = int(rng.uniform(smallest, 1.0) * min(photo_height, photo_width * height / width))
    across = min(photo_width, max(1, int(side * width / height))) if width != height else side
    top, left = rng.randint(photo_height - side + 1), rng.randint(photo_width - across + 1)
    image = cv2.resize(photo[top:top + side, left:left + across], (width, height),
                       interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(image[:, ::-1]) if rng.uniform() < 0.5 else image


@functools.lru_cache(maxsize=1)
def textures():
    """Terrain textures for the ``hard`` backgrounds: an elevation map Matplotlib ships,
    hill-shaded in two colour maps."""
    import matplotlib
    from matplotlib.cbook import get_sample_data
    from matplotlib.colors import LightSource

    with np.load(get_sample_data("jacksboro_fault_dem.npz", asfileobj=False)) as dem:
        elevation = dem["elevation"].astype(np.float64)
    light = LightSource(azdeg=315, altdeg=45)
    return tuple(shrink((light.shade(elevation, cmap=matplotlib.colormaps[name], vert_exag=0.1,
                                     blend_mode="overlay")[:, :, :3] * 255).astype(np.uint8))
                 for name in ("gist_earth", "copper"))


def place_shape(rng, size, taken, extent_range=EXTENT_RANGE, frame=None,
                max_covered=MAX_COVERED):
    """A shape of random class, size and position overlapping ``taken`` boxes only a little
    (at most ``max_covered`` of either box); None if no place is found. Its box, in drawing
    coordinates, includes the outline's width and is what placement compares (the
    annotation is the drawn extent, :func:`pixel_box`). The shape's larger side is
    ``extent_range`` of ``size``; it lies inside ``frame`` (``(width, height)``; default
    ``size`` square)."""
    frame = size if frame is None else np.asarray(frame)
    for _ in range(PLACEMENT_TRIES):
        class_id = rng.randint(len(CLASSES))
        extent = rng.uniform(*extent_range) * size
        outline = max(2, int(round(extent / 25)))
        points = unit_shape(CLASSES[class_id], rng.uniform(0, 2 * np.pi))
        points, box = position(rng, points, extent, outline, frame)
        if all(covered_fraction(box, other) <= max_covered for other in taken):
            return {"class_id": class_id, "points": points, "outline": outline, "box": box}
    return None


def position(rng, points, extent, width, frame):
    """``points`` scaled so that, drawn with a line ``width`` wide, their larger side is
    ``extent``, and moved to a random place inside ``frame``; and the box they then cover."""
    points = points * (extent - width) / np.ptp(points, axis=0).max()
    low = points.min(axis=0) - width / 2
    span = points.max(axis=0) + width / 2 - low
    corner = rng.uniform(0, 1, size=2) * (frame - span)
    points = points - low + corner
    return points, (corner[0], corner[1], corner[0] + span[0], corner[1] + span[1])


def place_distractor(rng, size, taken, extent_range=EXTENT_RANGE, frame=None,
                     max_covered=MAX_COVERED):
    """A shape of no class (:data:`DISTRACTORS`), sized and placed as :func:`place_shape`
    places an object; None if no place is found."""
    frame = size if frame is None else np.asarray(frame)
    for _ in range(PLACEMENT_TRIES):
        kind = DISTRACTORS[rng.randint(len(DISTRACTORS))]
        extent = rng.uniform(*extent_range) * size
        outline = max(2, int(round(extent / 25)))
        if kind == "letters":
            shape = place_letters(rng, extent, outline, frame)
        else:
            stroke = max(2, int(round(extent / 8))) if kind == "stroke" else 0
            points, box = position(rng, unit_distractor(kind, rng), extent,
                                   stroke + 2 * outline if stroke else outline, frame)
            shape = {"kind": kind, "points": points, "outline": outline, "stroke": stroke,
                     "box": box}
        if all(covered_fraction(shape["box"], other) <= max_covered for other in taken):
            return shape
    return None


def unit_distractor(kind, rng):
    """Outline points of a distractor around the origin, at a random angle."""
    if kind == "ellipse":
        angles = np.arange(90) * 2 * np.pi / 90
        points = np.column_stack([np.cos(angles), rng.uniform(0.35, 0.65) * np.sin(angles)])
    elif kind == "cross":
        arm = rng.uniform(0.15, 0.3)
        quarter = np.array([[arm, arm], [arm, 1], [-arm, 1]])
        points = np.concatenate([quarter @ turn(k * np.pi / 2) for k in range(4)])
    elif kind == "bar":
        ratio = rng.uniform(0.25, 0.5)
        points = np.array([[-1, -ratio], [1, -ratio], [1, ratio], [-1, ratio]], float)
    elif kind == "polygon":
        corners = rng.randint(5, 9)
        angles = (np.arange(corners) + rng.uniform(-0.3, 0.3, corners)) * 2 * np.pi / corners
        radii = rng.uniform(0.55, 1.0, corners)
        points = np.column_stack([radii * np.cos(angles), radii * np.sin(angles)])
    elif kind == "stroke":
        points = rng.uniform(-1, 1, size=(rng.randint(2, 5), 2))
        points[-1] = -points[0]  # ends apart, so the stroke is never a dot
    else:
        raise ValueError("unknown distractor %r" % kind)
    return points @ turn(rng.uniform(0, 2 * np.pi))


def turn(angle):
    """The matrix that turns row vectors by ``angle``."""
    return np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])


def place_letters(rng, extent, outline, frame):
    """1-3 letters of :data:`LETTERS`, their larger side ``extent``, at a random place."""
    text = "".join(rng.choice(list(LETTERS), rng.randint(1, 4)))
    font = (cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX)[rng.randint(2)]
    stroke = max(1, int(round(extent / 14)))
    (width, height), baseline = cv2.getTextSize(text, font, 1.0, stroke)
    scale = (extent - 2 * outline) / max(width, height + baseline)
    (width, height), baseline = cv2.getTextSize(text, font, scale, stroke)
    span = np.array([width + 2 * outline + stroke, height + baseline + 2 * outline + stroke])
    corner = rng.uniform(0, 1, size=2) * np.maximum(frame - span, 0)
    origin = (int(round(corner[0] + outline + stroke / 2)),
              int(round(corner[1] + outline + stroke / 2 + height)))
    return {"kind": "letters", "text": text, "font": font, "scale": scale, "stroke": stroke,
            "origin": origin, "outline": outline,
            "box": (corner[0], corner[1], corner[0] + span[0], corner[1] + span[1])}


def unit_shape(name, angle):
    """Outline points of a shape around the origin; a circle is a dense polygon."""
    if name == "star":
        radii = np.tile([1.0, STAR_INNER_RADIUS], 5)
    else:
        radii = np.ones({"circle": 90, "square": 4, "triangle": 3}[name])
    angles = angle + np.arange(len(radii)) * 2 * np.pi / len(radii)
    return np.column_stack([radii * np.cos(angles), radii * np.sin(angles)])


def covered_fraction(box, other):
    """The area two boxes share, as a fraction of the smaller one."""
    width = min(box[2], other[2]) - max(box[0], other[0])
    height = min(box[3], other[3]) - max(box[1], other[1])
    if width <= 0 or height <= 0:
        return 0.0
    smaller = min((b[2] - b[0]) * (b[3] - b[1]) for b in (box, other))
    return width * height / smaller


def colours(rng):
    """A random saturated fill and a near-black or near-white outline, as RGB tuples."""
    hsv = np.uint8([[[rng.randint(180), rng.randint(150, 256), rng.randint(150, 256)]]])
    fill = tuple(int(c) for c in cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0])
    outline = (rng.randint(0, 40),) * 3 if rng.uniform() < 0.5 else (rng.randint(215, 256),) * 3
    return fill, tuple(map(int, outline))


def draw_shape(image, shape, rng):
    """Fill a shape with a random saturated colour and outline it in near-black or near-white."""
    render(image, shape, *colours(rng))


def draw_distractor(image, shape, rng):
    """Draw a distractor in colours drawn as an object's (:func:`draw_shape`): a closed
    outline filled, a stroke or letters in the fill colour edged in the outline colour."""
    fill, outline = colours(rng)
    if shape["kind"] == "letters":
        for colour, width in ((outline, shape["stroke"] + 2 * shape["outline"]),
                              (fill, shape["stroke"])):
            cv2.putText(image, shape["text"], shape["origin"], shape["font"], shape["scale"],
                        colour, width, cv2.LINE_AA)
    elif shape["stroke"]:
        points = [np.round(shape["points"] * 16).astype(np.int32)]
        for colour, width in ((outline, shape["stroke"] + 2 * shape["outline"]),
                              (fill, shape["stroke"])):
            cv2.polylines(image, points, False, colour, thickness=width, lineType=cv2.LINE_AA,
                          shift=4)
    else:
        render(image, shape, fill, outline)


def render(image, shape, fill, outline, origin=(0, 0)):
    """Draw a shape's fill and outline, antialiased, in the given colours; ``origin``: the
    whole pixel of the shape's coordinates that is the image's top left."""
    points = np.round(shape["points"] * 16).astype(np.int32)  # 4 fractional bits
    points = [points - np.int32(16) * np.asarray(origin, np.int32)]
    cv2.fillPoly(image, points, fill, lineType=cv2.LINE_AA, shift=4)
    cv2.polylines(image, points, True, outline, thickness=shape["outline"],
                  lineType=cv2.LINE_AA, shift=4)


def relight(image, rng):
    """The image under other light: contrast 0.55-1.2 and brightness -40..+40 (of 255)
    changed, a colour cast of 0.85-1.15 per channel, a linear light gradient of up to +-30%
    across a random direction, in a third of images a Gaussian blur (sigma 0.5-1.3), and
    grey Gaussian noise of sigma 0-8."""
    height, width = image.shape[:2]
    contrast, brightness = rng.uniform(0.55, 1.2), rng.uniform(-40, 40)
    cast = rng.uniform(0.85, 1.15, size=3).astype(np.float32)
    angle, strength = rng.uniform(0, 2 * np.pi), rng.uniform(0, 0.6)
    ramp = (np.arange(width, dtype=np.float32)[None, :] * np.cos(angle)
            + np.arange(height, dtype=np.float32)[:, None] * np.sin(angle))
    ramp = (ramp - ramp.min()) / max(float(np.ptp(ramp)), 1.0) - 0.5
    light = (1 + strength * ramp).astype(np.float32)[:, :, None] * cast
    out = image.astype(np.float32)
    mean = float(out.mean())
    out = ((out - mean) * contrast + (mean + brightness)) * light
    if rng.uniform() < 1 / 3:
        out = cv2.GaussianBlur(out, (0, 0), rng.uniform(0.5, 1.3))
    sigma = np.float32(rng.uniform(0, 8))
    noise = np.random.default_rng(rng.randint(2 ** 31))  # seeded from rng; ten times faster
    out += noise.standard_normal((height, width, 1), dtype=np.float32) * sigma  # grey grain
    return np.clip(out, 0, 255).astype(np.uint8)


def pixel_box(shape, size):
    """The inclusive 0-based pixel box ``(x1, y1, x2, y2)`` of the pixels a shape covers at
    least half, drawn alone on a mask of the image's size (``size`` square, or ``(width,
    height)``), so inside the image."""
    width, height = (size, size) if np.isscalar(size) else size
    # Drawn on the part of the mask the outline (and a margin) covers: whole-pixel shifts
    # leave OpenCV's fixed-point drawing as it is, and a small mask is quicker to search.
    reach = shape["outline"] / 2 + 2
    left, top = np.maximum(np.floor(shape["points"].min(axis=0) - reach).astype(int), 0)
    right, bottom = np.minimum(np.ceil(shape["points"].max(axis=0) + reach).astype(int) + 1,
                               (width, height))
    mask = np.zeros((bottom - top, right - left), np.uint8)
    render(mask, shape, 255, 255, origin=(left, top))
    ys, xs = np.nonzero(mask >= 128)
    return (int(xs.min()) + left, int(ys.min()) + top, int(xs.max()) + left,
            int(ys.max()) + top)
