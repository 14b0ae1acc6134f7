"""``zoo serve`` on Ray Serve: a deployment around the zoo's own detector
(:func:`zoo.open_detector`), a FastAPI ingress, a page to try it.

Routes (``/docs`` and ``/openapi.json`` describe them):

- ``POST /detect``: one photo, as the raw request body or as the multipart field ``image``;
  answers the record ``zoo detect`` writes for it in results.json (:func:`detection_records`:
  its size, frame and detections, ``file`` the upload's name, no picture);
- ``GET /health``: the replica answering, its requests and the sizes of the batches it ran,
  and the deployment's replicas by state as Serve counts them;
- ``GET /model``: classes, input size, precision, epoch and the checkpoint's sha256;
- ``GET /``: a page where a person drops a photo and sees the boxes drawn.

Requests wait up to ``batch_wait`` seconds for others to fill a batch (``@serve.batch``),
run through the one batch runner as ``zoo detect``'s images do, and get their records back;
``batching`` off runs each alone. Every bad request gets a 4xx status and a one-line JSON
``{"error": "..."}``: a body that is not an image, cut short, over ``max_bytes`` or over
the pixel limit ``zoo detect`` enforces (:func:`zoo.data.images.max_pixels`, checked from
the header before decoding), an unknown field or query parameter, a wrong method or route;
a failure of the server itself is a 500 with a line and never a traceback.

Ray, Serve and FastAPI are imported in the functions that need them: the zoo loads this
module only to serve.
"""
import asyncio
import collections
import importlib
import logging
import math
import os
import resource
import threading
from dataclasses import dataclass
from email import policy
from email.parser import BytesParser

from zoo.checkpoint import checkpoint_sha256, open_detector
from zoo.data.images import check_complete, check_pixel_count, header
from zoo.errors import DataError, OptionsError
from zoo.inference.inputs import Input
from zoo.inference.runner import EncodedImage, ImageList, MAX_BATCH
from zoo.inference.tiles import detector_outputs
from zoo.jobs.detect import PictureFiles, describe

__all__ = ["DetectorServer", "RequestError", "Server", "detection_records", "read_upload",
           "start"]

LOG = logging.getLogger(__name__)
APP_NAME = "zoo"
DEPLOYMENT_NAME = "detector"
UPLOAD_FIELD = "image"
"""The multipart field holding the photo (a browser's form, ``curl -F image=@photo.jpg``)."""
RAW_NAME = "upload"
"""The ``file`` of the record of a photo sent as the raw body (a multipart one is named by
its file name)."""
NO_FILES = PictureFiles(None, None, ())
"""What a served photo writes: nothing (its record names no picture)."""
ONGOING_BATCHES = 2
"""Batches' worth of requests a replica takes at once: one running, one filling."""
QUEUED_REQUESTS = 256
"""Requests waiting for a replica before more are refused (503): each holds its body."""


class RequestError(Exception):
    """A bad request: its HTTP ``status`` (4xx) and a one-line ``message`` for the client."""

    def __init__(self, status, message):
        super().__init__(" ".join(str(message).split()))
        self.status = status


def read_upload(content_type, body, query=()):
    """The :class:`EncodedImage` a request sent: its body, or the one multipart field
    :data:`UPLOAD_FIELD`; a :class:`RequestError` for any other field or query parameter
    (``query``: their names), an empty body, or bytes that are not a whole image within
    the pixel limit (checked from the header, nothing decoded)."""
    if query:
        raise RequestError(400, "unknown query parameter %s: POST the photo alone, as the "
                                "body or the multipart field %r" % (", ".join(
                                    sorted(map(repr, query))), UPLOAD_FIELD))
    if (content_type or "").lower().startswith("multipart/"):
        upload = multipart_upload(content_type, body)
    else:
        upload = EncodedImage(bytes(body), RAW_NAME)
    check_upload(upload)
    return upload


def multipart_upload(content_type, body):
    """The :class:`EncodedImage` of the multipart field :data:`UPLOAD_FIELD`, named by its
    file name; a :class:`RequestError` for a damaged body, another field, or none."""
    message = BytesParser(policy=policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1", "replace") + b"\r\n\r\n" + body)
    parts = list(message.iter_parts()) if message.is_multipart() else []
    if not parts or message.defects:
        raise RequestError(400, "a damaged multipart body (no boundary, or no parts): send "
                                "the photo in the field %r" % UPLOAD_FIELD)
    names = [part.get_param("name", header="content-disposition") for part in parts]
    unknown = [name for name in names if name != UPLOAD_FIELD]
    if unknown or len(parts) > 1:
        raise RequestError(400, "unknown field %s: send one field, %r, holding the photo"
                           % (", ".join(map(repr, unknown or names[1:])), UPLOAD_FIELD))
    data = parts[0].get_payload(decode=True) or b""
    return EncodedImage(data, os.path.basename(parts[0].get_filename() or RAW_NAME))


def check_upload(upload):
    """Refuse, before any decoding, an upload that is empty, cut short or not an image (400)
    or has more pixels than ``zoo detect`` takes (413)."""
    if not upload.data:
        raise RequestError(400, "%s: an empty body: send a photo" % upload.name)
    try:
        check_complete(upload.data, upload.name)
        found = header(upload.data, upload.name, limit=math.inf)
    except DataError as err:
        raise RequestError(400, err) from None
    try:
        check_pixel_count(found, upload.name)
    except DataError as err:
        raise RequestError(413, err) from None


class Uploads(ImageList):
    """Uploaded photos as a source of the one batch runner: one that cannot be decoded
    loads as None (the runner skips it) with its reason in :attr:`errors`, so that it fails
    its own request only, not its batch's."""

    def __init__(self, uploads, exif, decode_for):
        super().__init__(uploads, exif, decode_for)
        self.errors = {}

    def load(self, index):
        try:
            return super().load(index)
        except DataError as err:
            # rgb_image names the image's place in the batch; the upload's name is enough.
            self.errors[index] = str(err).split(": ", 1)[-1]
            return None


def detection_records(detector, uploads, threshold, max_detections):
    """For each :class:`EncodedImage` of ``uploads``, run together through ``detector``'s
    batch runner: the record ``zoo detect`` writes for it (:func:`zoo.jobs.detect.describe`,
    no files), or the :class:`RequestError` of a photo that cannot be decoded. A large JPEG
    is decoded reduced to the network's input (as ``zoo detect --no-pictures`` decodes it):
    nothing is drawn."""
    source = Uploads(uploads, detector.exif, detector.preprocessing)
    records = []
    for index, rows, size in detector_outputs(detector.runner, source, len(uploads),
                                              None, threshold):
        if rows is None:
            records.append(RequestError(400, source.errors[index]))
            continue
        found = detector.detections(rows, size, threshold, max_detections)
        records.append(describe(Input(uploads[index].name), size, found, NO_FILES))
    return records


def model_description(detector, checkpoint):
    """What ``GET /model`` answers for ``detector``, opened from ``checkpoint``."""
    preprocessing = detector.preprocessing
    return {"checkpoint": os.path.basename(checkpoint), "epoch": detector.epoch,
            "runtime": type(detector).__name__, "class_names": list(detector.class_names),
            "category_ids": detector.category_ids,
            "input_size": {key: preprocessing.get(key)
                           for key in ("resize", "data_shape", "max_size")},
            "precision": detector.precision,
            "sha256": checkpoint_sha256(checkpoint, detector.epoch)}


def peak_resident_mb():
    """This process's peak resident memory, in MB (Linux counts ru_maxrss in KB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class DetectorServer:
    """One replica: the detector of ``options.checkpoint`` (a
    :class:`zoo.jobs.serve.ServeOptions`) behind the routes of :func:`build_app`. Batches
    run one at a time on a worker thread (a detector takes one call at a time), so that the
    replica keeps reading requests meanwhile."""

    def __init__(self, options):
        from ray import serve
        self.options = options
        self.detector = open_detector(options.checkpoint, options.epoch,
                                      data_threads=options.data_threads, exif=options.exif,
                                      data_shape=options.data_shape,
                                      max_size=options.max_size)
        self.model = model_description(self.detector, options.checkpoint)
        self.max_batch_size = (options.max_batch_size
                               or self.detector.runner.default_batch_size)
        self.lock = threading.Lock()
        self.batch_sizes = collections.Counter()
        self.requests = 0
        self.batched = None
        if options.batching:
            self.batched = serve.batch(max_batch_size=self.max_batch_size,
                                       batch_wait_timeout_s=options.batch_wait)(self.run_batch)

    async def detect(self, upload):
        """The record of one upload (:func:`detection_records`), batched with others unless
        batching is off."""
        self.requests += 1
        if self.batched is not None:
            found = await self.batched(upload)
        else:
            found = (await self.run_batch([upload]))[0]
        if isinstance(found, RequestError):
            raise found
        return found

    async def run_batch(self, uploads):
        return await asyncio.to_thread(self.detect_batch, uploads)

    def detect_batch(self, uploads):
        with self.lock:
            self.batch_sizes[len(uploads)] += 1
            return detection_records(self.detector, uploads, self.options.threshold,
                                     self.options.max_detections)

    def health(self):
        """What ``GET /health`` answers: this replica's counts."""
        return {"status": "ok", "replica": os.getpid(), "requests": self.requests,
                "batch_sizes": {str(size): count
                                for size, count in sorted(self.batch_sizes.items())},
                "batching": self.batched is not None, "max_batch_size": self.max_batch_size,
                "batch_wait": self.options.batch_wait,
                "peak_resident_mb": peak_resident_mb()}

    def __serve_build_asgi_app__(self):
        """The replica's FastAPI app (Serve calls it once the replica is made)."""
        return build_app(self)


IMAGE_BODY = {"schema": {"type": "string", "format": "binary"}}
DETECT_BODY = {
    "required": True,
    "description": "One photo (JPEG, PNG, BMP, TIFF, WebP, GIF), as the raw body or as the "
                   "multipart field 'image'.",
    "content": {"multipart/form-data": {"schema": {
                    "type": "object", "required": [UPLOAD_FIELD],
                    "properties": {UPLOAD_FIELD: {"type": "string", "format": "binary"}},
                    "additionalProperties": False}},
                "image/*": IMAGE_BODY, "application/octet-stream": IMAGE_BODY}}
"""The request body of ``POST /detect``, as OpenAPI describes it (FastAPI cannot tell it
from the handler, which reads the body itself)."""


def schemas():
    """The pydantic models of the responses, for the OpenAPI description: ``(Record,
    ErrorReply, Health, ModelInfo)``."""
    from typing import Dict, List, Optional
    from pydantic import BaseModel, Field

    class Detection(BaseModel):
        class_id: int
        class_name: str
        category_id: Optional[int] = Field(None, description="the COCO category id, for a "
                                                             "detector trained on a COCO file")
        score: float
        box: List[float] = Field(..., min_length=4, max_length=4,
                                 description="x1, y1, x2, y2 in the photo's pixels")

    class Record(BaseModel):
        """The record zoo detect writes for a photo in results.json."""
        file: str = Field(..., description="the upload's file name ('upload' for a raw body)")
        width: int
        height: int
        frame: str = Field(..., description="'displayed' (EXIF orientation applied) or "
                                            "'stored'")
        picture: Optional[str] = Field(None, description="always null: nothing is drawn")
        detections: List[Detection]

    class ErrorReply(BaseModel):
        error: str = Field(..., description="what is wrong, on one line")

    class Health(BaseModel):
        status: str
        replica: int = Field(..., description="the answering replica's process id")
        requests: int
        batch_sizes: Dict[str, int] = Field(..., description="batches run, by their size")
        batching: bool
        max_batch_size: int
        batch_wait: float
        peak_resident_mb: float
        replicas: Dict[str, int] = Field(..., description="the deployment's replicas by state "
                                                          "(RUNNING, STARTING...), as Serve "
                                                          "counts them")

    class ModelInfo(BaseModel):
        checkpoint: str
        epoch: Optional[int]
        runtime: str
        class_names: List[str]
        category_ids: Optional[List[int]]
        input_size: Dict[str, object]
        precision: Dict[str, object]
        sha256: str
    return Record, ErrorReply, Health, ModelInfo


def serve_replicas():
    """The detector's replicas by state (``{"RUNNING": 2}``), as Serve's controller counts
    them: each replica's /health counts only its own requests and batches."""
    from ray import serve
    application = serve.status().applications.get(APP_NAME)
    deployment = application.deployments.get(DEPLOYMENT_NAME) if application else None
    return {str(getattr(state, "value", state)): count
            for state, count in (deployment.replica_states if deployment else {}).items()}


def error_reply(status, message, headers=None):
    from fastapi.responses import JSONResponse
    return JSONResponse({"error": " ".join(str(message).split())}, status, headers=headers)


def http_error_line(request, status, detail):
    """The line of an HTTP error FastAPI raises (a wrong route or method)."""
    if status == 405:
        return "method %s is not allowed on %s" % (request.method, request.url.path)
    if status == 404:
        return "no route %s: POST /detect, GET /health, /model, /docs" % request.url.path
    return detail if isinstance(detail, str) else "bad request"


async def read_body(request, max_bytes):
    """The request's body, refused (413) past ``max_bytes``, as its Content-Length says or
    as it arrives."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
        raise RequestError(413 if declared.isdigit() else 400,
                           "a body of %s bytes: at most %d are taken" % (declared, max_bytes))
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise RequestError(413, "a body over %d bytes: at most %d are taken"
                               % (len(body), max_bytes))
    return bytes(body)


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>zoo serve</title>
<style>
 body { font-family: sans-serif; margin: 2em; max-width: 60em; }
 #drop { border: 3px dashed #888; border-radius: 8px; padding: 2em; text-align: center; }
 #drop.over { border-color: #c0c; background: #fdf; }
 canvas { max-width: 100%; margin-top: 1em; }
 #status.error { color: #b00; }
</style>
</head>
<body>
<h1>zoo serve</h1>
<p id="model">loading the model's description...</p>
<div id="drop">Drop a photo here, or choose one:
 <input type="file" id="file" accept="image/*"></div>
<p id="status">No photo yet.</p>
<canvas id="canvas" width="0" height="0"></canvas>
<ol id="detections"></ol>
<script>
"use strict";
const BOX_COLOUR = "#ff00ff";
const statusLine = document.getElementById("status");
const canvas = document.getElementById("canvas");
const drop = document.getElementById("drop");

function say(text, error) {
  statusLine.textContent = text;
  statusLine.className = error ? "error" : "";
}

fetch("model").then(r => r.json()).then(m => {
  document.getElementById("model").textContent = m.checkpoint + ": " +
    m.class_names.join(", ") + " (" + m.precision.dtype + ", " + m.runtime + ")";
});

function picture(file) {
  return new Promise((resolve, reject) => {
    const image = new Image();
    image.onload = () => resolve(image);
    image.onerror = () => reject(new Error("the browser cannot show " + file.name));
    image.src = URL.createObjectURL(file);
  });
}

function draw(image, record) {
  // The record's size is the photo's as the detector saw it (EXIF orientation applied),
  // which is how the browser shows it.
  canvas.width = record.width;
  canvas.height = record.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0, record.width, record.height);
  const line = Math.max(2, Math.round(Math.max(record.width, record.height) / 300));
  context.lineWidth = line;
  context.strokeStyle = BOX_COLOUR;
  context.font = (6 * line) + "px sans-serif";
  const list = document.getElementById("detections");
  list.innerHTML = "";
  for (const d of record.detections) {
    const [x1, y1, x2, y2] = d.box;
    context.strokeRect(x1, y1, x2 - x1, y2 - y1);
    context.fillStyle = BOX_COLOUR;
    context.fillText(d.class_name + " " + d.score.toFixed(2), x1 + line, Math.max(
      6 * line, y1 - line));
    const item = document.createElement("li");
    item.textContent = d.class_name + " " + d.score.toFixed(3) + " [" +
      d.box.map(v => v.toFixed(1)).join(", ") + "]";
    list.appendChild(item);
  }
}

async function detect(file) {
  say("detecting on " + file.name + "...");
  try {
    const response = await fetch("detect", {method: "POST", body: file,
      headers: {"Content-Type": file.type || "application/octet-stream"}});
    const reply = await response.json();
    if (!response.ok) {
      say(file.name + ": " + reply.error, true);
      return;
    }
    draw(await picture(file), reply);
    document.body.dataset.boxes = String(reply.detections.length);
    say(file.name + ": " + reply.detections.length + " box(es)");
  } catch (err) {
    say(file.name + ": " + err.message, true);
  }
}

document.getElementById("file").addEventListener("change", event => {
  if (event.target.files.length) detect(event.target.files[0]);
});
drop.addEventListener("dragover", event => { event.preventDefault(); drop.className = "over"; });
drop.addEventListener("dragleave", () => { drop.className = ""; });
drop.addEventListener("drop", event => {
  event.preventDefault();
  drop.className = "";
  if (event.dataTransfer.files.length) detect(event.dataTransfer.files[0]);
});
</script>
</body>
</html>
"""
"""The page at ``/``: drop a photo (or choose one), see its boxes drawn on it."""


def build_app(server):
    """The FastAPI app of a :class:`DetectorServer` replica: the routes of the module
    docstring, every error a one-line JSON reply."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.exceptions import HTTPException
    from zoo.version import __version__
    record, error, health, model = schemas()
    errors = {status: {"model": error, "description": text} for status, text in (
        (400, "not an image, cut short, an unknown field or query parameter"),
        (413, "a body over --max-bytes, or a photo over the pixel limit"),
        (405, "a method other than POST"))}
    app = FastAPI(title="zoo serve", version=__version__, description=(
        "The zoo's detector %s over HTTP: POST a photo to /detect, get the record zoo detect "
        "writes for it." % server.model["checkpoint"]))

    @app.exception_handler(RequestError)
    async def bad_request(request, err):
        return error_reply(err.status, err)

    @app.exception_handler(HTTPException)
    async def http_error(request, err):
        return error_reply(err.status_code, http_error_line(request, err.status_code,
                                                            err.detail), err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, err):
        return error_reply(400, "; ".join(str(item.get("msg")) for item in err.errors()))

    @app.middleware("http")
    async def no_traceback(request, call_next):
        """A failure of the server's own (a bug) is a 500 and one line; the traceback goes
        to the replica's log, never to the client."""
        try:
            return await call_next(request)
        except Exception as err:  # noqa: BLE001 - the client gets a line whatever failed
            LOG.exception("%s %s failed", request.method, request.url.path)
            return error_reply(500, "the server failed on this request (%s); its log has "
                                    "the details" % type(err).__name__)

    @app.post("/detect", response_model=record, responses=errors,
              openapi_extra={"requestBody": DETECT_BODY},
              summary="the record zoo detect writes for one photo")
    async def detect(request: Request):
        body = await read_body(request, server.options.max_bytes)
        upload = read_upload(request.headers.get("content-type"), body,
                             list(request.query_params))
        return JSONResponse(await server.detect(upload))

    @app.get("/health", response_model=health, summary="this replica's counts")
    async def get_health():
        # Serve's controller answers on a thread: the replica keeps serving meanwhile
        return dict(server.health(), replicas=await asyncio.to_thread(serve_replicas))

    @app.get("/model", response_model=model, summary="the detector served")
    async def get_model():
        return server.model

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return PAGE
    return app


@dataclass
class Server:
    """A running ``zoo serve``: its ``url``; :meth:`stop` shuts Serve and Ray down."""
    url: str

    def stop(self):
        """Delete the application (its replicas finish the requests they hold), then shut
        Ray down: ``serve.shutdown`` would race its own controller's shutdown task and print
        Ray's error line about it."""
        import ray
        from ray import serve
        try:
            serve.delete(APP_NAME)
        finally:
            ray.shutdown()


def quiet_ray():
    """Keep Serve's progress lines out of the user's terminal (its warnings still show):
    importing ``ray.serve`` sets its logger to INFO, so this comes after."""
    importlib.import_module("ray.serve")
    logging.getLogger("ray.serve").setLevel(logging.WARNING)


def start(options):
    """Start Ray on this machine (an object store of ``options.object_store_mb``, no
    dashboard, its own lines and the workers' output kept in Ray's log files, but errors)
    and serve ``options`` (a :class:`zoo.jobs.serve.ServeOptions`) there; returns the
    :class:`Server` once it answers. Anything that stops it meanwhile (an error, a signal)
    shuts Ray down."""
    import ray
    quiet_ray()
    cores = len(os.sched_getaffinity(0))
    ray.init(address="local", num_cpus=cores, include_dashboard=False, log_to_driver=False,
             object_store_memory=options.object_store_mb << 20, logging_level=logging.ERROR)
    try:
        deploy(options, cores)
    except BaseException:
        ray.shutdown()
        raise
    return Server("http://%s:%d/" % (options.host, options.port))


def deploy(options, cores):
    """Start Serve's proxy on ``options.host`` and ``port`` and run the replicas, each its
    share of the ``cores`` (its OpenMP threads too); an error of the detector's (a missing
    checkpoint) raised in a replica is one line here."""
    from ray import serve
    from ray.serve.config import HTTPOptions
    try:
        serve.start(http_options=HTTPOptions(host=options.host, port=options.port),
                    logging_config={"log_level": "WARNING"})
    except RuntimeError as err:  # Serve's proxy could not listen there
        raise OptionsError("cannot listen on %s port %d: %s; name another --port (or --host)"
                           % (options.host, options.port, error_line([str(err)], err))
                           ) from None
    threads = max(1, cores // options.replicas)
    deployment = serve.deployment(
        serve.ingress()(DetectorServer), name=DEPLOYMENT_NAME, num_replicas=options.replicas,
        max_ongoing_requests=ONGOING_BATCHES * (options.max_batch_size or MAX_BATCH),
        max_queued_requests=QUEUED_REQUESTS,
        ray_actor_options={"num_cpus": cores / options.replicas,
                           "runtime_env": {"env_vars": {"OMP_NUM_THREADS": str(threads)}}})
    try:
        serve.run(deployment.bind(options), name=APP_NAME, route_prefix="/",
                  logging_config={"log_level": "WARNING"})
    except RuntimeError as err:  # Serve's "Deploying application zoo failed"
        messages = [deployed.message for application in serve.status().applications.values()
                    for deployed in application.deployments.values() if deployed.message]
        raise OptionsError("the detector did not start: %s"
                           % error_line(messages, err)) from None


def error_line(messages, err):
    """The line saying why Serve did not start: the last line of the last traceback in
    ``messages`` (a replica's in Serve's status: ``zoo.artifact.ArtifactError: no complete
    artifact ...``), without the exception's name; else Serve's error ``err``."""
    for message in reversed(messages):
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        if lines:
            name, colon, text = lines[-1].partition(": ")
            return (text if colon and " " not in name else lines[-1]).rstrip(".")
    return " ".join(str(err).split())
