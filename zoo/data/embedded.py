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
"""
import functools
import json
import os
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
from PIL import Image

from zoo.data.dataset import write_class_names
from zoo.data.records import data_error
from zoo.data.voc import CLASS_FILE, annotation_xml

__all__ = ["CLASSES", "MAX_COVERED", "MAX_OBJECTS", "background", "covered_fraction",
           "default_root", "draw_image", "draw_shape", "generate", "photos", "pixel_box",
           "place_shape", "render", "shrink", "write_image_set"]

CLASSES = ("circle", "square", "triangle", "star")
MANIFEST = "manifest.json"
GENERATOR_VERSION = 2
"""Bump when the drawing or the annotations change, so existing folders are regenerated."""

JPEG_QUALITY = 90
MAX_OBJECTS = 4
EXTENT_RANGE = (0.15, 0.5)
"""An object's larger box side, as a fraction of the image side."""
MAX_COVERED = 0.35
"""Largest fraction of either box that two objects' boxes may share."""
PLACEMENT_TRIES = 20
PHOTO_SIDE = 512
STAR_INNER_RADIUS = 0.45


def default_root(output_dir="output"):
    """Where the demo keeps the dataset: ``<output_dir>/shapes``."""
    return os.path.join(output_dir, "shapes")


def generate(root, seed=0, num_train=1500, num_val=200, image_size=256):
    """Write the dataset to ``root`` (a VOC folder with ``train``, ``val`` and ``trainval``
    image sets and ``classes.txt``) and return ``root``.

    Nothing is written if ``root`` already holds this seed, counts and size; a
    folder generated with other settings is replaced; any other non-empty
    folder is left alone and raises :class:`DataError`.
    """
    manifest = {"generator": __name__, "version": GENERATOR_VERSION, "seed": seed,
                "num_train": num_train, "num_val": num_val, "image_size": image_size,
                "classes": list(CLASSES)}
    if read_manifest(root) == manifest:
        return root
    clear_folder(root)
    for folder in ("Annotations", "JPEGImages", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    write_manifest(root, dict(manifest, complete=False))  # marks the folder as ours meanwhile
    image_ids = ["%06d" % index for index in range(num_train + num_val)]
    photos()  # load once before the threads share it
    with ThreadPoolExecutor(os.cpu_count()) as pool:  # OpenCV and Pillow release the GIL
        list(pool.map(lambda index: write_example(root, image_ids[index], seed, index,
                                                  image_size), range(len(image_ids))))
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


def write_example(root, image_id, seed, index, size):
    """Draw image ``index`` of the dataset and write it as JPEG with its VOC annotation."""
    image, objects = draw_image(np.random.RandomState([seed, index]), size)
    Image.fromarray(image).save(os.path.join(root, "JPEGImages", image_id + ".jpg"), "JPEG",
                                quality=JPEG_QUALITY)
    xml = annotation_xml(image_id + ".jpg", size, size,
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


def draw_image(rng, size):
    """One ``size`` x ``size`` RGB image and its objects ``[(class_id, (x1, y1, x2, y2))]``,
    each box the shape's inclusive pixel extent (see :func:`pixel_box`)."""
    image = background(rng, size)
    objects, placed = [], []
    for _ in range(rng.randint(1, MAX_OBJECTS + 1)):
        shape = place_shape(rng, size, placed)
        if shape is not None:
            draw_shape(image, shape, rng)
            placed.append(shape["box"])
            objects.append((shape["class_id"], pixel_box(shape, size)))
    return image, objects


def background(rng, size):
    """A random square crop of a photo, possibly mirrored, resized to ``size``."""
    photo = photos()[rng.randint(len(photos()))]
    height, width = photo.shape[:2]
    side = int(rng.uniform(0.35, 1.0) * min(height, width))
    top, left = rng.randint(height - side + 1), rng.randint(width - side + 1)
    crop = cv2.resize(photo[top:top + side, left:left + side], (size, size),
                      interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(crop[:, ::-1]) if rng.uniform() < 0.5 else crop


def place_shape(rng, size, taken, extent_range=EXTENT_RANGE, frame=None):
    """A shape of random class, size and position overlapping ``taken`` boxes only a little;
    None if no place is found. Its box, in drawing coordinates, includes the outline's width
    and is what placement compares (the annotation is the drawn extent, :func:`pixel_box`).
    The shape's larger side is ``extent_range`` of ``size``; it lies inside ``frame``
    (``(width, height)``; default ``size`` square)."""
    frame = size if frame is None else np.asarray(frame)
    for _ in range(PLACEMENT_TRIES):
        class_id = rng.randint(len(CLASSES))
        extent = rng.uniform(*extent_range) * size
        outline = max(2, int(round(extent / 25)))
        points = unit_shape(CLASSES[class_id], rng.uniform(0, 2 * np.pi))
        points = points * (extent - outline) / np.ptp(points, axis=0).max()
        low = points.min(axis=0) - outline / 2
        span = points.max(axis=0) + outline / 2 - low
        corner = rng.uniform(0, 1, size=2) * (frame - span)
        points = points - low + corner
        box = (corner[0], corner[1], corner[0] + span[0], corner[1] + span[1])
        if all(covered_fraction(box, other) <= MAX_COVERED for other in taken):
            return {"class_id": class_id, "points": points, "outline": outline, "box": box}
    return None


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


def draw_shape(image, shape, rng):
    """Fill a shape with a random saturated colour and outline it in near-black or near-white."""
    hsv = np.uint8([[[rng.randint(180), rng.randint(150, 256), rng.randint(150, 256)]]])
    fill = tuple(int(c) for c in cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0])
    outline = (rng.randint(0, 40),) * 3 if rng.uniform() < 0.5 else (rng.randint(215, 256),) * 3
    render(image, shape, fill, tuple(map(int, outline)))


def render(image, shape, fill, outline):
    """Draw a shape's fill and outline, antialiased, in the given colours."""
    points = [np.round(shape["points"] * 16).astype(np.int32)]  # 4 fractional bits
    cv2.fillPoly(image, points, fill, lineType=cv2.LINE_AA, shift=4)
    cv2.polylines(image, points, True, outline, thickness=shape["outline"],
                  lineType=cv2.LINE_AA, shift=4)


def pixel_box(shape, size):
    """The inclusive 0-based pixel box ``(x1, y1, x2, y2)`` of the pixels a shape covers at
    least half, drawn alone on a ``size`` x ``size`` mask (so inside the image)."""
    mask = np.zeros((size, size), np.uint8)
    render(mask, shape, 255, 255)
    ys, xs = np.nonzero(mask >= 128)
    return (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))
