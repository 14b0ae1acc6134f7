"""Photos in an object store (``s3://bucket/prefix/``) for ``zoo detect --ray``: listed on
the driver and read on the Ray workers through pyarrow's ``S3FileSystem``, which takes the
standard AWS environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_DEFAULT_REGION``) and here also ``AWS_ENDPOINT_URL`` (an S3-compatible store: MinIO,
Ceph, a local moto), which pyarrow 18 leaves to the caller. pyarrow is imported only here,
when a URL is read."""
import functools
import os
import re

from zoo.errors import DataError, OptionsError
from zoo.inference.inputs import Input, skipped_entry, subfolder_skipped

__all__ = ["ENDPOINT_VARIABLE", "SCHEMES", "is_url", "list_url", "read_url"]

SCHEMES = ("s3",)
"""The object stores read: pyarrow's S3 (and any store speaking its protocol)."""
URL = re.compile(r"([a-z][a-z0-9+.-]*)://(.*)", re.IGNORECASE)
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"
"""The environment variable naming an S3-compatible store's address (AWS's own name)."""
REGION_VARIABLE = "AWS_DEFAULT_REGION"


def is_url(spec):
    """Whether an input ``spec`` is an object-store URL (``s3://...``)."""
    found = isinstance(spec, str) and URL.fullmatch(spec)
    return bool(found) and found.group(1).lower() in SCHEMES


def filesystem():
    """pyarrow's S3 file system of this process's environment as it is now."""
    return s3_filesystem(os.environ.get(ENDPOINT_VARIABLE) or None,
                         os.environ.get(REGION_VARIABLE) or None)


@functools.lru_cache(maxsize=None)
def s3_filesystem(endpoint, region):
    """pyarrow's S3 file system of the store at ``endpoint`` (None: AWS's) in ``region``
    (None: pyarrow's default), made once per process: it holds the connections. The keys
    are the environment's, read by pyarrow's AWS SDK."""
    from pyarrow import fs
    options = {"endpoint_override": endpoint, "region": region}
    return fs.S3FileSystem(**{key: value for key, value in options.items() if value})


def key_path(url):
    """``bucket/key`` of an ``s3://bucket/key`` URL (pyarrow's path of it)."""
    return URL.fullmatch(url).group(2).rstrip("/")


def list_url(url, recursive):
    """``(inputs, left_out)`` of one URL: the :class:`~zoo.inference.inputs.Input` of an
    object, or of each image under a prefix (in key order; deeper ones with ``recursive``),
    and a :class:`~zoo.inference.inputs.Skipped` for each other object and hidden one
    under it. A URL naming nothing, or a store that cannot be listed, is an OptionsError."""
    from pyarrow import fs
    scheme = URL.fullmatch(url).group(1)
    path = key_path(url)
    try:
        info = filesystem().get_file_info(path)
        if info.type == fs.FileType.File:
            return [Input(url)], []
        if info.type != fs.FileType.Directory:
            raise OptionsError("input %s: no such object or prefix" % url)
        found = filesystem().get_file_info(fs.FileSelector(path, recursive=recursive))
    except OSError as err:
        raise OptionsError("input %s: cannot list it: %s" % (url, err)) from None
    inputs, left_out = [], []
    for entry in sorted(found, key=lambda entry: entry.path):
        name = "%s://%s" % (scheme, entry.path)
        if entry.type != fs.FileType.File:
            if not recursive:  # with recursive, its objects are listed
                left_out.append(subfolder_skipped(name))
            continue
        # A video is a type not read: frames are decoded from a local file.
        skipped = skipped_entry(name, entry.path,
                                unread_videos="a video (not read from an object store)")
        if skipped is None:
            inputs.append(Input(name))
        else:
            left_out.append(skipped)
    return inputs, left_out


def read_url(url):
    """The bytes of the object at ``url``; DataError naming it where it cannot be read."""
    try:
        with filesystem().open_input_stream(key_path(url)) as stream:
            return stream.read()
    except OSError as err:
        raise DataError("%s: cannot be read: %s" % (url, err)) from None
