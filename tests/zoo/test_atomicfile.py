"""zoo.atomicfile, the one writer of the zoo's files: a write that a full disk, a read-only
folder, a failing rename or Ctrl-C stops leaves the file as it was and no temporary file
beside it, whichever module writes (zoo detect's results and labels, pictures, artifacts).
``zoo detect`` on a full disk is in test_bad_detect.py."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import zoo
from zoo import artifact, atomicfile
from zoo.inference.visualize import save_image

from factories import FULL_DISK, failing_writes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(zoo.__file__)))
OLD = b"the file as it was"
WRITERS = {
    "write_text": lambda path: atomicfile.write_text(path, "new " * 1000),
    "save_image": lambda path: save_image(path, np.full((31, 17, 3), 200, np.uint8)),
    "artifact": lambda path: artifact.atomic_write(path,
                                                   atomicfile.bytes_writer(b"new" * 1000)),
}
"""The writers of zoo detect's results and labels, of pictures and of artifacts."""


@pytest.mark.parametrize("error", [FULL_DISK, KeyboardInterrupt()], ids=["full-disk", "ctrl-c"])
@pytest.mark.parametrize("writer", WRITERS)
def test_a_write_stopped_half_way_leaves_the_file_as_it_was(tmp_path, monkeypatch, writer,
                                                            error):
    path = tmp_path / "picture.png"
    path.write_bytes(OLD)
    opened = failing_writes(monkeypatch, error)
    with pytest.raises((type(error), artifact.ArtifactError)) as caught:
        WRITERS[writer](str(path))
    monkeypatch.undo()
    assert len(opened) == 1  # a temporary file was made and half written
    assert os.listdir(str(tmp_path)) == ["picture.png"] and path.read_bytes() == OLD
    if writer == "artifact" and error is FULL_DISK:
        assert str(caught.value) == "%s: cannot be written (No space left on device)" % path
    elif error is FULL_DISK:  # named by the file written, not the temporary one
        assert str(caught.value) == "[Errno 28] No space left on device: %r" % str(path)


def test_a_rename_that_fails_leaves_no_temporary_file(tmp_path):
    taken = tmp_path / "results.json"
    taken.mkdir()
    (taken / "inside").write_bytes(OLD)
    with pytest.raises(IsADirectoryError) as caught:
        atomicfile.write_text(str(taken), "new")
    assert str(caught.value) == "[Errno 21] Is a directory: %r" % str(taken)
    assert os.listdir(str(tmp_path)) == ["results.json"]


CHILD = """
import os, sys
sys.path.insert(0, sys.argv[1])
from zoo.atomicfile import write_text
path = sys.argv[2]
if os.geteuid() == 0:  # root writes anywhere: drop to nobody, once the imports are done
    os.setgid(65534)
    os.setuid(65534)
with open(path) as stream:
    assert stream.read() == "old"  # the folder can be read, only writing is refused
try:
    write_text(path, "new")
except PermissionError as err:
    print(err)
"""


def test_a_read_only_folder_is_refused_naming_the_file_and_keeps_it():
    # Not under pytest's tmp_path, whose folders another user cannot enter.
    folder = tempfile.mkdtemp(prefix="zoo-read-only-")
    path = os.path.join(folder, "results.json")
    try:
        with open(path, "w") as stream:
            stream.write("old")
        os.chmod(path, 0o644)
        os.chmod(folder, 0o555)
        done = subprocess.run([sys.executable, "-c", CHILD, ROOT, path], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "[Errno 13] Permission denied: %r\n" % path
        assert os.listdir(folder) == ["results.json"]
        with open(path) as stream:
            assert stream.read() == "old"
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


def test_a_written_file_is_whole_and_replaces_the_old_one(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_bytes(OLD)
    atomicfile.write_text(str(path), "1 cat 0.9 \u00e9\n", durable=False)
    assert path.read_text(encoding="utf-8") == "1 cat 0.9 \u00e9\n"
    assert os.listdir(str(tmp_path)) == ["labels.txt"]
