"""``zoo serve``: serve an artifact (fp32, int8, on MXNet), an exported ``.onnx`` file (on
ONNX Runtime) or an OpenVINO ``.xml`` file over HTTP on Ray Serve, in the foreground until
Ctrl-C or SIGTERM, which shut Serve and Ray down. Needs the ray extra (pip install
'mxnet-detection-zoo[ray]').

POST /detect with a photo, as the raw body or the multipart field 'image', answers the
record zoo detect writes for it (size, frame, detections); GET /health and /model describe
the server and the detector; /docs and /openapi.json the API; / is a page where a photo
dropped is shown with its boxes. Requests are batched (--max-batch-size, --batch-wait;
--no-batching runs each alone) on --replicas copies of the detector. A bad request gets a
4xx status and a one-line JSON error. Ray starts on this machine with a --object-store-mb
store and no dashboard; its logs stay in its session folder.

Examples:
    zoo serve output/train/ssd_mobilenetv2_stride8
    curl -F image=@photo.jpg http://127.0.0.1:8000/detect
    curl --data-binary @photo.jpg -H 'Content-Type: image/jpeg' http://127.0.0.1:8000/detect
    zoo serve model.onnx --port 8080 --replicas 2 --max-batch-size 4 --batch-wait 0.02
    zoo serve out/ssd-int8.xml --host 0.0.0.0 --threshold 0.3
"""
from zoo.flags import ARTIFACT_OR_DEPLOYED, add_flags
from zoo.jobs.serve import ServeOptions, serve

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("checkpoint", metavar="CHECKPOINT", help=ARTIFACT_OR_DEPLOYED)
    add_flags(p, ServeOptions, "epoch", "host", "port", "replicas", "max_batch_size",
              "batch_wait", "batching", "max_bytes", "threshold", "max_detections", "exif",
              "data_threads", "data_shape", "max_size", "object_store_mb")


def run(args):
    stopped_by = serve(ServeOptions.from_flags(args))
    print("stopped by %s; Serve and Ray shut down" % stopped_by)
    return 0
