"""The documentation names only paths that exist.

Every Markdown file in docs/, README.md and BENCHMARKS.md is read; every repository path it
names in inline code (backticks) or as a relative link target must exist in the checkout.
A path is "repository-like" when it starts with one of the repository's top-level folders
(``zoo/``, ``symbols/``, ``tests/``, ...), is a path ending in .py, .md, .yaml, .yml or .json,
is a root document (``README.md``, found at the root or in docs/) or a test file named alone
(``test_faults.py``, found under tests/). Left alone: URLs, glob patterns (``*``),
placeholders (``PREFIX``, ``DATA``, ``<...>``, ``{split}``, ``...``) and paths that users create
(``output/...``, ``runs/...``, ``mydata...``, absolute paths). Fenced code blocks are command
transcripts and are not read.
"""
import itertools
import os
import re

import pytest

from factories import ROOT

DOCUMENTS = sorted(
    [os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
     if name.endswith(".md")] + ["README.md", "BENCHMARKS.md"])

REPOSITORY_FOLDERS = ("zoo/", "symbols/", "tests/", "tools/", "configs/", "zoo_bench/",
                      "benchmarks/", "docs/", ".ci/", "requirements/")
FILE_ENDINGS = (".py", ".md", ".yaml", ".yml", ".json")
USER_PATHS = ("output/", "runs/", "mydata", "/", "~", "./output/", "./runs/")
PLACEHOLDER = re.compile(r"[*<>]|\.\.\.|\$|\{\w*\}|\b[A-Z][A-Z0-9_]{2,}\b(?!\.md)")
"""Globs, ``<name>``, ``{split}``, ellipses, variables, and words in capitals (``PREFIX``,
``DATA``; not ``README.md``)."""
URL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose_lines(text):
    """The lines outside fenced code blocks, with their line numbers."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def expand_braces(token):
    """``a_{b,c}.yaml`` -> ``a_b.yaml``, ``a_c.yaml`` (as the shell does)."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", token)
    if not match:
        return [token]
    return list(itertools.chain.from_iterable(
        expand_braces(token[:match.start()] + part + token[match.end():])
        for part in match.group(1).split(",")))


def clean(token):
    """A token of a code span as a path: quotes, punctuation, ``--flag=`` and ``::test``,
    ``:line`` and ``#anchor`` taken off."""
    token = token.strip("\"'(),;")
    token = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
    token = re.sub(r"(::.*|:\d+(-\d+)?|#.*)$", "", token)
    return token.rstrip(".,:;")


ROOT_DOCUMENT = re.compile(r"^[A-Z][A-Z_]*\.md$")
TEST_FILE = re.compile(r"^test_\w+\.py$")


def looks_like_repository_path(token):
    """Under a repository folder; a path ending in a source or document suffix; a root
    document (``README.md``); or a test file named alone (``test_faults.py``). Other bare
    file names (``results.json``, GluonCV's ``train_ssd.py``) are files users or other
    projects have."""
    return (token.startswith(REPOSITORY_FOLDERS)
            or ("/" in token and token.endswith(FILE_ENDINGS))
            or ROOT_DOCUMENT.match(token) is not None or TEST_FILE.match(token) is not None)


def ignored(token):
    return (not token or URL.match(token) or token.startswith(USER_PATHS)
            or PLACEHOLDER.search(token) is not None)


def code_paths(line):
    """Repository-like paths named in the inline code of one line."""
    for _, span in CODE_SPAN.findall(line):
        for word in span.split():
            for token in expand_braces(clean(word)):
                if not ignored(token) and looks_like_repository_path(token):
                    yield token


def link_targets(line):
    """Relative link targets (files, not anchors or URLs) of one line."""
    for target in LINK.findall(line):
        target = target.split("#", 1)[0]
        if target and not URL.match(target) and not ignored(target):
            yield target


def exists(path):
    """A path is the repository root's; a test file named alone is somewhere under tests/
    (which mirrors the package); a root document named alone is at the root or in docs/."""
    if TEST_FILE.match(path):
        return any(path in names for _, _, names in os.walk(os.path.join(ROOT, "tests")))
    if ROOT_DOCUMENT.match(path):
        return any(os.path.exists(os.path.join(ROOT, folder, path)) for folder in ("", "docs"))
    return os.path.exists(os.path.join(ROOT, path))


def missing_paths(document):
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        text = handle.read()
    missing = []
    for number, line in prose_lines(text):
        for path in code_paths(line):
            if not exists(path):
                missing.append(f"{document}:{number}: `{path}`")
        for target in link_targets(line):
            resolved = os.path.normpath(os.path.join(os.path.dirname(document), target))
            if not os.path.exists(os.path.join(ROOT, resolved)):
                missing.append(f"{document}:{number}: link ({target})")
    return missing


def test_the_documents_are_found():
    assert "docs/models.md" in DOCUMENTS and len(DOCUMENTS) > 5


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_path_a_document_names_exists(document):
    missing = missing_paths(document)
    assert not missing, "paths named in the docs that are not in the checkout:\n" + "\n".join(
        missing)


def test_the_checker_sees_paths_in_code_and_links():
    line = ("see `zoo/nowhere.py`, `--network benchmarks/x_{a,b}.yaml`, [a](docs/gone.md), "
            "`output/train/model`, `PREFIX-int8`, `symbols/*.py`, [b](https://example.com) and "
            "[c](#anchor), `README.md`, `test_nowhere.py`, `results.json`, `labels/{split}.json`")
    assert list(code_paths(line)) == ["zoo/nowhere.py", "benchmarks/x_a.yaml",
                                      "benchmarks/x_b.yaml", "README.md", "test_nowhere.py"]
    assert exists("README.md") and exists("test_faults.py") and exists("symbols/")
    assert not exists("test_nowhere.py") and not exists("zoo/modeling/fpn.py")
    assert list(link_targets(line)) == ["docs/gone.md"]
