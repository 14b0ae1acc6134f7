"""Decoding large photos for detection: the whole photo (what ``zoo detect`` did before, and
still does where it draws pictures) beside libjpeg's DCT scaling at the size the network
needs (:func:`zoo.inference.runner.photo`), side by side on the same JPEGs.

Each way runs in a fresh Python process (peak memory is a process's own), over every photo
once, decoding (EXIF orientation applied) and resizing to the input of a Faster R-CNN at
``data_shape`` x ``max_size`` as detection does (:func:`zoo.data.transforms.inference_transform`).
Reports milliseconds per photo of decoding and of resizing (wall and CPU), the peak resident
memory above the process's before the first photo, and the ratios of the whole decode to the
scaled one. By default it generates ``num_images`` 4000x3000 JPEGs (half turned by EXIF
orientation 6, as a phone stores portrait photos) into ``output_dir``. Loads no MXNet.
"""
import json
import os
import subprocess
import sys
import time

import cv2
import numpy as np
from PIL import Image

from zoo_bench.options import DecodeBenchmarkOptions
from zoo_bench.timing import machine_line, print_line

__all__ = ["DecodeBenchmarkOptions", "WAYS", "benchmark_decode", "generate_photos"]

WAYS = ("whole", "dct")
"""``whole``: decode the whole photo, then resize; ``dct``: decode at the largest 1/2, 1/4
or 1/8 scale that still reaches the input size, then resize."""
ORIENTATION_TAG = 0x0112


def generate_photos(options):
    """``num_images`` JPEGs of ``image_size`` in ``output_dir`` (kept between runs: made
    once per size and seed), smooth shapes with sensor-like noise, every other one stored
    turned (EXIF orientation 6); returns their paths."""
    width, height = options.image_size
    os.makedirs(options.output_dir, exist_ok=True)
    paths = []
    for index in range(options.num_images):
        path = os.path.join(options.output_dir, "photo_%dx%d_%d_%03d.jpg"
                            % (width, height, options.seed, index))
        paths.append(path)
        if os.path.exists(path):
            continue
        rng = np.random.RandomState([options.seed, index])
        coarse = rng.randint(0, 256, (height // 100 + 1, width // 100 + 1, 3)).astype(np.uint8)
        pixels = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
        noise = rng.normal(0, 6, (height, width, 1)).astype(np.int16)
        pixels = np.clip(pixels.astype(np.int16) + noise, 0, 255).astype(np.uint8)
        exif = Image.Exif()
        if index % 2:
            exif[ORIENTATION_TAG] = 6
        Image.fromarray(pixels).save(path, quality=90, exif=exif.tobytes())
    return paths


def status_mb(field):
    """A memory figure of this process's /proc status (``VmRSS``, ``VmHWM``), in MB."""
    with open("/proc/self/status") as stream:
        for line in stream:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/self/status has no %s" % field)


def reset_peak():
    """Start the peak resident memory (VmHWM) afresh from now (Linux 4.0 and later): the
    imports before the first photo peak higher than a reduced decode does."""
    with open("/proc/self/clear_refs", "w") as stream:
        stream.write("5")


def measure(way, paths, preprocessing):
    """Decode and resize every photo one way: ``{"decode_ms", "decode_cpu_ms", "resize_ms",
    "resize_cpu_ms", "peak_mb", "factors"}`` (per photo; peak above the start)."""
    from zoo.data.transforms import NO_LABEL, inference_transform
    from zoo.inference.runner import ReducedImage, photo
    transform = inference_transform(preprocessing)
    decode_for = preprocessing if way == "dct" else None
    start_mb = status_mb("VmRSS")
    reset_peak()
    times = np.zeros((len(paths), 4))
    factors = []
    for row, path in enumerate(paths):
        wall, cpu = time.perf_counter(), time.process_time()
        image = photo(path, preprocessing=decode_for)
        times[row, :2] = time.perf_counter() - wall, time.process_time() - cpu
        factors.append(image.factor if isinstance(image, ReducedImage) else 1)
        pixels = image.pixels if isinstance(image, ReducedImage) else image
        wall, cpu = time.perf_counter(), time.process_time()
        transform(pixels, NO_LABEL)
        times[row, 2:] = time.perf_counter() - wall, time.process_time() - cpu
        del image, pixels
    peak_mb = status_mb("VmHWM")
    decode_ms, decode_cpu_ms, resize_ms, resize_cpu_ms = 1e3 * times.mean(axis=0)
    return {"decode_ms": decode_ms, "decode_cpu_ms": decode_cpu_ms, "resize_ms": resize_ms,
            "resize_cpu_ms": resize_cpu_ms, "peak_mb": peak_mb - start_mb,
            "factors": sorted(set(factors))}


def measure_in_child(way, paths, preprocessing):
    """:func:`measure` in a fresh Python process (this module run with ``-m``)."""
    request = json.dumps({"way": way, "paths": paths, "preprocessing": preprocessing})
    done = subprocess.run([sys.executable, "-m", __name__, request], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (way, done.stderr[-4000:]))
    return json.loads(done.stdout.splitlines()[-1])


def report_lines(results):
    lines = ["%-6s %10s %14s %10s %14s %10s %13s %8s" % (
        "decode", "decode ms", "decode CPU ms", "resize ms", "resize CPU ms", "total ms",
        "peak +RSS MB", "scales")]
    for way, r in results.items():
        lines.append("%-6s %10.1f %14.1f %10.1f %14.1f %10.1f %13.0f %8s" % (
            way, r["decode_ms"], r["decode_cpu_ms"], r["resize_ms"], r["resize_cpu_ms"],
            r["decode_ms"] + r["resize_ms"], r["peak_mb"],
            ",".join("1/%d" % f for f in r["factors"])))
    whole, dct = results["whole"], results["dct"]
    lines.append("whole / dct: decode time %.2fx, decode CPU %.2fx, decode and resize %.2fx, "
                 "peak memory %.2fx" % (
                     whole["decode_ms"] / dct["decode_ms"],
                     whole["decode_cpu_ms"] / max(dct["decode_cpu_ms"], 1e-9),
                     (whole["decode_ms"] + whole["resize_ms"])
                     / (dct["decode_ms"] + dct["resize_ms"]),
                     whole["peak_mb"] / max(dct["peak_mb"], 1e-9)))
    return lines


def benchmark_decode(options, log=print_line):
    """Time both :data:`WAYS` on the options' photos (generated unless named), each in its
    own process; report lines go to ``log``. Returns ``{way: figures}``."""
    from zoo.schema.preprocessing import MEAN_PIXELS, STD_PIXELS, short_side
    paths = list(options.images) or generate_photos(options)
    preprocessing = short_side({"data_shape": options.data_shape,
                                "max_size": options.max_size, "mean_pixels": MEAN_PIXELS,
                                "std_pixels": STD_PIXELS}, 32)
    sizes = sorted({Image.open(path).size for path in paths})
    log("%d JPEG(s) of %s, decoded for short side %d, long side at most %d, each way in a "
        "fresh process, one pass" % (len(paths), ", ".join("%dx%d" % size for size in sizes),
                                     options.data_shape, options.max_size))
    log(machine_line())
    results = {way: measure_in_child(way, paths, preprocessing) for way in WAYS}
    for line in report_lines(results):
        log(line)
    return results


def _child(request):
    """The child side of :func:`measure_in_child`: figures as one JSON line on stdout."""
    request = json.loads(request)
    print(json.dumps(measure(request["way"], request["paths"], request["preprocessing"])))


if __name__ == "__main__":
    _child(sys.argv[1])
