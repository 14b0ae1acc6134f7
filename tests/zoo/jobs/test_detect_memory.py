"""``zoo detect`` of a Faster R-CNN FPN ResNet-50 at 600x1000 over a folder of 4000x3000 phone
photos (half turned by EXIF, an RGBA PNG, a corrupt JPEG), default flags and crops: its peak
resident memory stays within 2 GB (4 GB before, at batch 8 with an executor's memory plan per
orientation), and flat over the folder once both orientations have run."""
import os
import subprocess
import sys
import time

import cv2
import pytest
from PIL import Image

from factories import smooth_image

PEAK_LIMIT_MB = 2048
GROWTH_LIMIT_MB = 64
"""What the resident memory may still grow once the first photos of both orientations ran."""
PHOTOS = 10
ORIENTATION_TAG = 0x0112


def write_photos(folder):
    """``PHOTOS`` 4000x3000 JPEGs, every other one stored turned (EXIF orientation 6), an RGBA
    PNG and a truncated JPEG among them."""
    os.makedirs(folder)
    for index in range(PHOTOS):
        pixels = smooth_image(3000, 4000, index, 100, cv2.INTER_CUBIC)[:, :, ::-1]
        exif = Image.Exif()
        if index % 2:
            exif[ORIENTATION_TAG] = 6
        Image.fromarray(pixels).save(os.path.join(folder, "IMG_%04d.jpg" % index),
                                     quality=90, exif=exif.tobytes())
    Image.fromarray(smooth_image(3000, 4000, 99, 100, cv2.INTER_CUBIC)).convert("RGBA").save(
        os.path.join(folder, "IMG_0003a.png"))
    with open(os.path.join(folder, "IMG_0000.jpg"), "rb") as whole:
        head = whole.read(20000)
    with open(os.path.join(folder, "IMG_0005a.jpg"), "wb") as cut:
        cut.write(head)


def status_mb(pid, field="VmRSS"):
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None


def lines(path):
    try:
        with open(path) as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


@pytest.mark.slow
def test_detect_of_an_fpn_on_phone_photos_stays_within_2_gb(tmp_path):
    prefix, folder, output = (str(tmp_path / name) for name in ("fpn", "photos", "out"))
    subprocess.run([sys.executable, "-m", "zoo", "export", "--network",
                    "faster_rcnn_fpn_resnet50", "--data-shape", "600", "--max-size", "1000",
                    "--output", prefix], check=True, capture_output=True)
    write_photos(folder)
    detect = subprocess.Popen([sys.executable, "-m", "zoo", "detect", "--checkpoint", prefix,
                               folder, "--output", output, "--crops"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    early, late = 0.0, 0.0  # resident MB up to the third record written, and after it
    peak = 0.0  # the peak resident MB so far, as the kernel keeps it
    while detect.poll() is None:
        written, resident = lines(os.path.join(output, "results.jsonl")), status_mb(detect.pid)
        peak = max(peak, status_mb(detect.pid, "VmHWM") or 0.0)
        if resident is not None and 0 < written <= 3:
            early = max(early, resident)
        elif resident is not None and 3 < written < PHOTOS + 1:
            late = max(late, resident)
        time.sleep(0.1)
    out, err = detect.communicate()
    assert detect.returncode == 0, err.decode()[-2000:]
    assert "%d images" % (PHOTOS + 1) in out.decode() and "1 skipped" in out.decode(), out
    assert peak <= PEAK_LIMIT_MB, "peak resident memory %.0f MB" % peak
    assert early > 0 and late > 0
    assert late <= early + GROWTH_LIMIT_MB, (early, late)

