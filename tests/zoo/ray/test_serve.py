"""``zoo serve`` through its command line: one server (a ``python -m zoo serve`` process on
loopback) answers every test of the file, from a real HTTP client. Its records are ``zoo
detect``'s, every bad request gets a 4xx one-line JSON error and leaves it serving, it
batches under load within bounded memory, its OpenAPI description says what it does, its
page draws the boxes in headless Chromium, and Ctrl-C shuts it down cleanly; ``import zoo``
and ``zoo --help`` load no Ray."""
import base64
import hashlib
import http.client
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
import pytest

from zoo.cli import main

from factories import ROOT, smooth_image

pytest.importorskip("ray.serve", reason="zoo serve needs the ray extra (pip install -e '.[ray]')")

THRESHOLD = "0.3"
"""The detect_prefix artifact's scores clear 0.3 (factories.spread_ssd_model)."""
MAX_BYTES = 200_000
"""The server's --max-bytes: every photo here is smaller, a body over it is refused."""
SIZES = {"wide.jpg": (97, 143), "tall.png": (131, 77), "small.jpg": (60, 61)}
"""Photos: (height, width), odd sides, JPEG and PNG."""
START_SECONDS = 180
"""The longest the server may take to answer (Ray, Serve and a replica on a busy machine)."""
LOAD_CLIENTS, LOAD_REQUESTS, LOAD_SECONDS = 16, 96, 240
"""The load test: clients at once, requests in all, and the seconds they must end in."""
GROWTH_MB = 300
"""How much the replica's peak resident memory may grow over the load test."""
TRACEBACK_MARKS = ("Traceback", 'File "', "line ", "\n")


def own_environment():
    """This process's environment without Ray's variables: a Ray started in this process
    before (the cluster tests' ``ray.init``, their loopback setting) leaves its session's
    settings there, and a server started with them had its HTTP proxy killed."""
    return {name: value for name, value in os.environ.items() if not name.startswith("RAY_")}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Served:
    """A ``python -m zoo serve`` process: its ``port``, the seconds it took to answer
    (``started``), the lines it printed (``lines``)."""

    def __init__(self, checkpoint, flags, log):
        self.port = free_port()
        self.lines = queue.Queue()
        self.log = log
        begun = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zoo", "serve", checkpoint, "--port", str(self.port),
             *flags], stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, cwd=ROOT,
            env=own_environment())
        threading.Thread(target=self._read, daemon=True).start()
        line = self.next_line(START_SECONDS)
        assert line.startswith("serving ") and "http://127.0.0.1:%d/" % self.port in line, (
            line, self.errors())
        self.started = time.monotonic() - begun

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, seconds):
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            self.process.kill()
            raise AssertionError("zoo serve printed nothing in %d s: %s"
                                 % (seconds, self.errors()))
        assert line is not None, "zoo serve ended (%s): %s" % (self.process.wait(),
                                                               self.errors())
        return line

    def errors(self):
        with open(self.log) as handle:
            return handle.read()[-3000:]

    def request(self, method, path, body=None, headers=None):
        """``(status, content type, body)`` of one request on a connection of its own."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request(method, path, body, headers or {})
            response = connection.getresponse()
            return response.status, response.getheader("content-type"), response.read()
        finally:
            connection.close()

    def json(self, method, path, body=None, headers=None):
        status, _, data = self.request(method, path, body, headers)
        return status, json.loads(data)

    def stop(self):
        """Ctrl-C: the exit status, and what it printed last on stdout."""
        self.process.send_signal(signal.SIGINT)
        status = self.process.wait(120)
        return status, self.next_line(10)


def multipart(fields, boundary="zoo-test-boundary"):
    """A multipart/form-data body of ``fields``, ``(name, file name, bytes)`` each, and its
    content type."""
    parts = [b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
             b"Content-Type: application/octet-stream\r\n\r\n%s\r\n"
             % (boundary.encode(), name.encode(), filename.encode(), data)
             for name, filename, data in fields]
    return (b"".join(parts) + b"--%s--\r\n" % boundary.encode(),
            "multipart/form-data; boundary=%s" % boundary)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve_photos")
    for seed, (name, (height, width)) in enumerate(sorted(SIZES.items())):
        assert cv2.imwrite(str(folder / name), smooth_image(height, width, seed))
    return folder


@pytest.fixture(scope="module")
def server(detect_prefix, tmp_path_factory):
    """One ``zoo serve`` of conftest's detect_prefix for the file's tests, at the default
    settings but the threshold and a small --max-bytes; stopped with Ctrl-C at the end,
    which must shut it down cleanly."""
    log = str(tmp_path_factory.mktemp("serve_log") / "stderr.txt")
    served = Served(detect_prefix, ["--threshold", THRESHOLD, "--max-bytes", str(MAX_BYTES)],
                    log)
    print("zoo serve answered in %.1f s" % served.started)
    yield served
    status, last = served.stop()
    assert status == 0 and last.startswith("stopped by SIGINT"), (status, last,
                                                                  served.errors())
    assert "Traceback" not in served.errors()


def zoo_detect_records(checkpoint, photos, output):
    """``zoo detect``'s records of the photos, by file name."""
    assert main(["detect", "--checkpoint", checkpoint, str(photos), "--output", str(output),
                 "--threshold", THRESHOLD, "--no-progress"]) == 0
    with open(os.path.join(output, "results.json")) as handle:
        return {os.path.basename(entry["file"]): entry
                for entry in json.load(handle)["images"]}


def assert_same_record(served, written):
    """A served record is ``zoo detect``'s: size, frame and detections (boxes within
    1e-4)."""
    for key in ("width", "height", "frame"):
        assert served[key] == written[key], key
    assert served["picture"] is None
    assert len(served["detections"]) == len(written["detections"]) > 0
    for ours, theirs in zip(served["detections"], written["detections"]):
        assert ours.keys() == theirs.keys()
        assert {key: ours[key] for key in ours if key != "box"} == {
            key: theirs[key] for key in theirs if key != "box"}
        np.testing.assert_allclose(ours["box"], theirs["box"], atol=1e-4, rtol=0)


def test_served_records_are_zoo_detects(server, detect_prefix, photos, tmp_path):
    written = zoo_detect_records(detect_prefix, photos, tmp_path / "detect")
    assert sorted(written) == sorted(SIZES)
    for index, name in enumerate(sorted(SIZES)):
        data = (photos / name).read_bytes()
        if index % 2:  # the raw body
            status, record = server.json("POST", "/detect", data,
                                         {"Content-Type": "image/jpeg"})
            assert record["file"] == "upload"
        else:  # a browser's form
            body, content_type = multipart([("image", name, data)])
            status, record = server.json("POST", "/detect", body,
                                         {"Content-Type": content_type})
            assert record["file"] == name
        assert status == 200, record
        assert_same_record(record, written[name])


@pytest.mark.slow
@pytest.mark.parametrize("export_format, runtime, suffix", [
    ("onnx", "onnxruntime", ".onnx"), ("openvino", "openvino", ".xml")])
def test_a_deployed_file_serves_zoo_detects_records(export_format, runtime, suffix,
                                                    detect_prefix, photos, tmp_path):
    pytest.importorskip(runtime)
    output = str(tmp_path / "ssd")
    assert main(["export", "--checkpoint", detect_prefix, "--format", export_format,
                 "--output", output]) == 0
    checkpoint = output + suffix
    written = zoo_detect_records(checkpoint, photos, tmp_path / "detect")
    served = Served(checkpoint, ["--threshold", THRESHOLD], str(tmp_path / "stderr.txt"))
    try:
        for name in sorted(SIZES):
            status, record = served.json("POST", "/detect", (photos / name).read_bytes())
            assert status == 200, record
            assert_same_record(record, written[name])
        status, model = served.json("GET", "/model")
        with open(checkpoint, "rb") as handle:
            assert model["sha256"] == hashlib.sha256(handle.read()).hexdigest()
        assert model["epoch"] is None and model["runtime"] != "Detector"
    finally:
        status, last = served.stop()
    assert status == 0 and last.startswith("stopped by SIGINT"), (last, served.errors())


def bad_requests(photos):
    """``(what, method, path, body, headers, statuses)`` of every kind of bad request."""
    jpeg = (photos / "wide.jpg").read_bytes()
    huge_png = bytearray((photos / "tall.png").read_bytes())
    huge_png[16:24] = (20000).to_bytes(4, "big") * 2  # IHDR: 20000x20000 pixels
    # Cut short, its end marker put back: whole by the header and tail, refused decoding.
    corrupt = jpeg[:len(jpeg) // 2] + jpeg[-2:]
    two, two_type = multipart([("image", "a.jpg", jpeg), ("image", "b.jpg", jpeg)])
    other, other_type = multipart([("photo", "a.jpg", jpeg)])
    raw = {"Content-Type": "image/jpeg"}
    return [
        ("not an image", "POST", "/detect", b"hello, world", raw, (400,)),
        ("empty", "POST", "/detect", b"", raw, (400,)),
        ("truncated", "POST", "/detect", jpeg[:len(jpeg) // 2], raw, (400,)),
        ("corrupt inside", "POST", "/detect", corrupt, raw, (400,)),
        ("too many bytes", "POST", "/detect", bytes(MAX_BYTES + 1), raw, (413,)),
        ("too many pixels", "POST", "/detect", bytes(huge_png), raw, (413,)),
        ("wrong method", "GET", "/detect", None, {}, (405,)),
        ("wrong method on a page", "DELETE", "/", None, {}, (405,)),
        ("no such route", "POST", "/detect/more", jpeg, raw, (404,)),
        ("unknown field", "POST", "/detect", other, {"Content-Type": other_type}, (400,)),
        ("two fields", "POST", "/detect", two, {"Content-Type": two_type}, (400,)),
        ("unknown query parameter", "POST", "/detect?threshold=0.9", jpeg, raw, (400,)),
        ("damaged multipart", "POST", "/detect", b"--x\r\nnothing",
         {"Content-Type": "multipart/form-data"}, (400,)),
    ]


def assert_one_line_error(what, status, content_type, body, statuses):
    assert status in statuses, (what, status, body[:300])
    assert content_type == "application/json", (what, content_type)
    text = body.decode("utf-8")
    reply = json.loads(text)
    assert list(reply) == ["error"] and reply["error"], (what, text)
    for mark in TRACEBACK_MARKS:
        assert mark not in reply["error"], (what, mark, text)


def test_every_bad_request_is_a_4xx_line_and_50_leave_it_serving(server, photos):
    requests = bad_requests(photos)
    for what, method, path, body, headers, statuses in requests:
        assert_one_line_error(what, *server.request(method, path, body, headers), statuses)
    for number in range(50):
        what, method, path, body, headers, statuses = requests[number % len(requests)]
        status = server.request(method, path, body, headers)[0]
        assert status in statuses, (what, status)
    status, record = server.json("POST", "/detect", (photos / "small.jpg").read_bytes(),
                                 {"Content-Type": "image/jpeg"})
    assert status == 200 and record["width"] == SIZES["small.jpg"][1]
    status, health = server.json("GET", "/health")
    assert status == 200 and health["status"] == "ok"
    assert health["replicas"] == {"RUNNING": 1}  # Serve's count, --replicas' default


def test_the_openapi_description_is_what_it_serves(server, photos):
    status, api = server.json("GET", "/openapi.json")
    assert status == 200
    assert {"/detect", "/health", "/model"} <= set(api["paths"])
    detect = api["paths"]["/detect"]
    assert list(detect) == ["post"]
    body = detect["post"]["requestBody"]["content"]
    assert body["multipart/form-data"]["schema"]["required"] == ["image"]
    assert {"image/*", "application/octet-stream"} <= set(body)
    responses = detect["post"]["responses"]
    schemas = api["components"]["schemas"]
    assert {"200", "400", "405", "413"} <= set(responses)
    assert responses["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorReply")
    record_schema = schemas[responses["200"]["content"]["application/json"]["schema"][
        "$ref"].rsplit("/", 1)[-1]]
    status, record = server.json("POST", "/detect", (photos / "wide.jpg").read_bytes())
    assert status == 200
    assert set(record) == set(record_schema["properties"])
    assert set(record_schema["required"]) <= set(record)
    detection_schema = schemas["Detection"]
    for detection in record["detections"]:
        assert set(detection) <= set(detection_schema["properties"])
        assert set(detection_schema["required"]) <= set(detection)
    for path, name in (("/health", "Health"), ("/model", "ModelInfo")):
        status, reply = server.json("GET", path)
        assert status == 200 and set(reply) == set(schemas[name]["properties"]), path


def test_the_model_is_described(server, detect_prefix):
    from zoo import artifact
    meta = artifact.read_meta(detect_prefix, artifact.default_epoch(detect_prefix))
    status, model = server.json("GET", "/model")
    assert status == 200
    assert model["class_names"] == meta["class_names"]
    assert model["sha256"] == meta["params_sha256"]
    assert model["precision"] == meta["precision"]
    assert model["input_size"]["data_shape"] == meta["preprocessing"]["data_shape"]


def test_under_load_requests_are_batched_within_bounded_memory(server, photos):
    bodies = [(photos / name).read_bytes() for name in sorted(SIZES)]
    server.json("POST", "/detect", bodies[0])  # a warm replica: its first batch bound
    before = server.json("GET", "/health")[1]

    def one(number):
        started = time.monotonic()
        status, _, body = server.request("POST", "/detect", bodies[number % len(bodies)],
                                         {"Content-Type": "application/octet-stream"})
        return status, time.monotonic() - started
    begun = time.monotonic()
    with ThreadPoolExecutor(LOAD_CLIENTS) as pool:
        results = list(pool.map(one, range(LOAD_REQUESTS), timeout=LOAD_SECONDS))
    seconds = time.monotonic() - begun
    assert [status for status, _ in results] == [200] * LOAD_REQUESTS
    after = server.json("GET", "/health")[1]
    batches = {int(size): count - before["batch_sizes"].get(size, 0)
               for size, count in after["batch_sizes"].items()}
    assert sum(size * count for size, count in batches.items()) == LOAD_REQUESTS
    assert max(size for size, count in batches.items() if count) > 1, batches
    assert after["peak_resident_mb"] <= before["peak_resident_mb"] + GROWTH_MB, (before,
                                                                                after)
    print("%d requests from %d clients in %.1f s (busy machine), batches %s" % (
        LOAD_REQUESTS, LOAD_CLIENTS, seconds, batches))


def test_the_page_draws_the_boxes_of_a_dropped_photo(server, photos):
    if not os.path.exists("/usr/bin/chromium"):
        pytest.skip("Chromium is not installed at /usr/bin/chromium")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    data = (photos / "wide.jpg").read_bytes()
    record = server.json("POST", "/detect", data)[1]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        try:
            page = browser.new_page()
            page.goto("http://127.0.0.1:%d/" % server.port)
            page.wait_for_function("document.getElementById('model').textContent"
                                   ".includes('circle')")
            page.evaluate("""([data, name]) => {
                const bytes = Uint8Array.from(atob(data), c => c.charCodeAt(0));
                const transfer = new DataTransfer();
                transfer.items.add(new File([bytes], name, {type: "image/jpeg"}));
                document.getElementById("drop").dispatchEvent(
                    new DragEvent("drop", {dataTransfer: transfer, bubbles: true}));
            }""", [base64.b64encode(data).decode("ascii"), "wide.jpg"])
            page.wait_for_function("document.body.dataset.boxes !== undefined",
                                   timeout=60_000)
            assert page.evaluate("document.body.dataset.boxes") == str(
                len(record["detections"]))
            size = page.evaluate("[canvas.width, canvas.height]")
            pixels = np.array(page.evaluate(
                "Array.from(canvas.getContext('2d').getImageData(0, 0, canvas.width, "
                "canvas.height).data)"), np.uint8).reshape(size[1], size[0], 4)
        finally:
            browser.close()
    assert size == [record["width"], record["height"]]
    photo = cv2.cvtColor(cv2.imread(str(photos / "wide.jpg")), cv2.COLOR_BGR2RGB)
    drawn = magenta(pixels) & ~magenta(photo)
    for detection in record["detections"]:  # each box's left edge drawn
        x1, y1, x2, y2 = detection["box"]
        column = int(min(max(round(x1), 0), size[0] - 1))
        rows = slice(int(y1 + (y2 - y1) * 0.3), int(y2 - (y2 - y1) * 0.3) + 1)
        assert drawn[rows, column].any(), detection
    assert drawn.mean() < 0.9  # the photo is there, not a filled canvas


def magenta(pixels):
    """Where RGB(A) ``pixels`` are the page's box colour, #ff00ff (give or take)."""
    return (pixels[:, :, 0] > 200) & (pixels[:, :, 1] < 60) & (pixels[:, :, 2] > 200)


def test_import_zoo_and_the_help_load_no_ray():
    code = ("import sys, zoo\n"
            "from zoo.cli import main\n"
            "for argv in (['--help'], ['serve', '--help'], ['benchmark-serve', '--help']):\n"
            "    try:\n"
            "        main(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "loaded = sorted(name for name in sys.modules if name.split('.')[0] in "
            "('ray', 'fastapi', 'starlette', 'playwright'))\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "zoo serve" in done.stdout and "benchmark-serve" in done.stdout


def test_without_the_ray_extra_zoo_serve_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setattr("zoo.jobs.serve.RAY_PACKAGES", ("ray", "a_package_not_installed"))
    assert main(["serve", "model.onnx"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zoo serve: error: ") and err.count("\n") == 1
    assert "a_package_not_installed is not installed" in err and "[ray]" in err
