"""Requests/s and p50/p99 latency of ``zoo serve`` on loopback at several numbers of
concurrent clients, with dynamic batching on and off, beside the same detector called
in-process (one call per photo, one call at a time: what an application calling
:func:`zoo.open_detector` itself gets), on generated JPEG photos.

Each client is a thread holding one keep-alive HTTP connection and sending its share of the
requests one after another; a request's latency is from sending it to reading the whole
reply. In-process, each client thread calls the zoo's serving path
(:func:`zoo.ray.serve.detection_records`, the bytes decoded there) under the detector's
lock. Before the timed requests at each setting, as many untimed ones as the most clients
bind the graph's executors. The server runs in this process's Ray (:func:`zoo.ray.serve.start`),
started once per batching setting.
"""
import http.client
import os
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor

import cv2

from zoo.checkpoint import open_detector
from zoo.inference.runner import EncodedImage
from zoo.jobs.serve import ServeOptions, check_ray_installed
from zoo_bench.options import ServeBenchmarkOptions
from zoo_bench.timing import Stopwatch, machine_line, print_line

__all__ = ["ServeBenchmarkOptions", "benchmark_serve", "report"]

MODES = ("in-process", "served, batching", "served, no batching")
REQUEST_TIMEOUT = 300
"""Seconds a request may take before the benchmark gives up on the server."""
JPEG_QUALITY = 90


def prepared_checkpoint(options):
    """The checkpoint to serve: the options' own, or the network's with random weights
    written as an artifact into ``work_dir``."""
    if options.checkpoint is not None:
        return options.checkpoint
    from zoo import artifact, get_model  # MXNet's: not for a deployed checkpoint
    overrides = {} if options.data_shape is None else {"data_shape": options.data_shape}
    model = get_model(options.network, **overrides)
    model.init_params(seed=options.seed)
    prefix = os.path.join(options.work_dir, options.network)
    os.makedirs(options.work_dir, exist_ok=True)
    artifact.export(model, prefix)
    return prefix


def generated_photos(options):
    """``num_images`` JPEG photos of ``image_size``: random blocks, enlarged (boxes on them
    are not all near-ties, as on pixel noise)."""
    import numpy as np
    rng = np.random.RandomState(options.seed)
    width, height = options.image_size
    photos = []
    for index in range(options.num_images):
        small = rng.randint(0, 256, (max(2, height // 16), max(2, width // 16), 3), np.uint8)
        ok, data = cv2.imencode(".jpg", cv2.resize(small, (width, height)),
                                [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        assert ok
        photos.append(EncodedImage(data.tobytes(), "photo%d.jpg" % index))
    return photos


def timed(call, clients, requests):
    """``{"requests_per_s", "p50_ms", "p99_ms"}`` of ``requests`` calls of ``call(client,
    number)`` from ``clients`` threads at once, each making its share in turn."""
    latencies = []
    lock = threading.Lock()

    def client(index):
        for number in range(index, requests, clients):
            watch = Stopwatch()
            call(index, number)
            with lock:
                latencies.append(watch())
    watch = Stopwatch()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    wall = watch()
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"requests_per_s": requests / wall, "p50_ms": statistics.median(latencies) * 1e3,
            "p99_ms": cuts[98] * 1e3}


def sweep(make_call, options):
    """:func:`timed` at each number of clients of ``options``, after an untimed round at the
    most of them; ``make_call(clients)`` gives the call for that many clients."""
    most = max(options.clients)
    timed(make_call(most), most, most)
    return {clients: timed(make_call(clients), clients, options.requests)
            for clients in options.clients}


def in_process(checkpoint, photos, options):
    """The sweep of the detector called in-process, one photo a call, one call at a
    time."""
    from zoo.ray.serve import detection_records
    detector = open_detector(checkpoint)
    defaults = ServeOptions(checkpoint)  # the threshold and detections zoo serve keeps
    lock = threading.Lock()

    def make_call(clients):
        def call(client, number):
            with lock:
                found = detection_records(detector, [photos[number % len(photos)]],
                                          defaults.threshold, defaults.max_detections)
            assert isinstance(found[0], dict), found[0]
        return call
    return sweep(make_call, options)


def served(checkpoint, photos, options, batching):
    """The sweep of ``zoo serve`` of ``checkpoint`` on loopback, with or without
    batching."""
    from zoo.ray.serve import start
    serving = ServeOptions(checkpoint, port=options.port, replicas=options.replicas,
                           max_batch_size=options.max_batch_size,
                           batch_wait=options.batch_wait, batching=batching)
    server = start(serving)
    try:
        def make_call(clients):
            connections = [http.client.HTTPConnection("127.0.0.1", options.port,
                                                      timeout=REQUEST_TIMEOUT)
                           for _ in range(clients)]

            def call(client, number):
                connection = connections[client]
                connection.request("POST", "/detect", photos[number % len(photos)].data,
                                   {"Content-Type": "image/jpeg"})
                response = connection.getresponse()
                body = response.read()
                assert response.status == 200, body[:300]
            return call
        return sweep(make_call, options)
    finally:
        server.stop()


def benchmark_serve(options, report_line=print_line):
    """Every mode of :data:`MODES` swept; returns ``{"machine", "checkpoint", "clients",
    MODE: {clients: figures}}``, each mode's lines reported as it ends."""
    check_ray_installed()
    checkpoint = prepared_checkpoint(options)
    photos = generated_photos(options)
    result = {"machine": machine_line("%d photos of %dx%d" % (
        len(photos), *options.image_size), "%d timed requests a setting" % options.requests),
        "checkpoint": checkpoint, "clients": options.clients}
    report_line(result["machine"])
    for mode, run in zip(MODES, (lambda: in_process(checkpoint, photos, options),
                                 lambda: served(checkpoint, photos, options, True),
                                 lambda: served(checkpoint, photos, options, False))):
        result[mode] = run()
        report_line("%s: %s" % (mode, ", ".join(
            "%d client(s) %.1f requests/s" % (clients, figures["requests_per_s"])
            for clients, figures in result[mode].items())))
    return result


def report(result):
    """The figures side by side: requests/s, p50 and p99 of each mode at each number of
    clients, and the served ones' throughput against in-process and batching against
    none."""
    lines = [result["machine"], "%s; requests/s, p50 and p99 latency (ms):" % result[
        "checkpoint"], "%-8s" % "clients" + "".join(" | %-26s" % mode for mode in MODES)
        + " | batching/in-process | batching/none"]
    for clients in result["clients"]:
        row = [result[mode][clients] for mode in MODES]
        lines.append("%-8d" % clients + "".join(
            " | %8.1f %8.1f %8.1f" % (figures["requests_per_s"], figures["p50_ms"],
                                       figures["p99_ms"]) for figures in row)
            + " | %19.2f | %13.2f" % (row[1]["requests_per_s"] / row[0]["requests_per_s"],
                                       row[1]["requests_per_s"] / row[2]["requests_per_s"]))
    return "\n".join(lines)
