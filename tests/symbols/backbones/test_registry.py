"""The backbone registry: a backbone added through the places docs/models.md names ("Adding
a backbone": its module's registration, a config, the docs tables) is built by
``zoo.get_model`` and ``zoo check``, and listed wherever backbones are listed; the docs
tables agree with the registry."""
import os
import re

import numpy as np
import pytest

import zoo
from symbols.backbones import BACKBONES, Backbone, StageSpec, register_backbone
from symbols.backbones.registry import unregister_backbone
from symbols.layers import conv_bn
from zoo.cli import main as zoo_main
from zoo.config import loading, registry
from zoo.engine.health.loss import initial_loss_limit
from zoo.jobs import check
from zoo.pretrained.maps import GLUONCV
from factories import ROOT

DOCS = os.path.join(ROOT, "docs", "models.md")
TOY_CONFIG = """\
# SSD on the toy backbone: its two stages, plus the extra blocks of ssd_mobilenetv2.
base: ssd_mobilenetv2
backbone: toynet
"""


class ToyNet(Backbone):
    """Five strided 3x3 convolutions of 8-32 channels: stages c4 (stride 16), c5 (32)."""

    name = "toynet"

    def stages(self):
        return [StageSpec("c4", "toy4_relu", 16, 16), StageSpec("c5", "toy5_relu", 32, 32)]

    def build_stage(self, data, stage_name):
        layers = {"c4": ((1, 8), (2, 8), (3, 16), (4, 16)), "c5": ((5, 32),)}[stage_name]
        for index, channels in layers:
            data = conv_bn(data, "toy%d" % index, channels, kernel=3, stride=2)
        return data

    def _body(self, data):
        return self.build_stage(self.build_stage(data, "c4"), "c5")


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy backbone registered in this process and its config ``ssd_toynet`` among the
    registered models (a folder of links to the packaged configs, and the toy's): both gone
    after the test."""
    register_backbone("toynet", published_params=42_016,
                      initial_loss_limits={"ssd": 4.5})(ToyNet)
    configs = tmp_path / "configs"
    configs.mkdir()
    packaged = loading.configs_dir()
    for name in os.listdir(packaged):
        os.symlink(os.path.join(packaged, name), str(configs / name))
    (configs / "ssd_toynet.yaml").write_text(TOY_CONFIG)
    for module in (registry, loading, check):
        monkeypatch.setattr(module, "configs_dir", lambda: str(configs))
    try:
        yield str(configs / "ssd_toynet.yaml")
    finally:
        unregister_backbone("toynet")


def test_a_registered_backbone_is_built_checked_and_listed(toy, capsys):
    assert "ssd_toynet" in zoo.list_models()
    model = zoo.get_model("ssd_toynet", data_shape=192, num_classes=3)
    assert model.backbone.name == "toynet" and model.num_params() > 0
    assert model.describe()[0].startswith("12x12/16 6x6/32")
    assert zoo_main(["check", toy]) == 0
    table = capsys.readouterr().out
    assert re.search(r"^ssd_toynet +192x192 ", table, re.M), table
    assert "1 configs checked, 0 failed" in table
    # listed where backbones are listed: the registry and the config field's choices
    assert "toynet" in BACKBONES and "toynet" not in GLUONCV
    with pytest.raises(zoo.ConfigError, match="one of .*toynet"):
        zoo.get_model("ssd_toynet", backbone="toynett")
    # its facts: the classifier's count, the first loss's limit; no GluonCV weights
    classifier = BACKBONES["toynet"]().classifier()
    shapes = classifier.infer_shape(data=(1, 3, 224, 224))[0]
    assert sum(int(np.prod(shape)) for shape in shapes[1:]) == 42_016
    assert initial_loss_limit("ssd", "toynet") == (4.5, "ssd on toynet")
    assert initial_loss_limit("faster_rcnn", "toynet") == (2.0, "faster_rcnn")
    with pytest.raises(zoo.PretrainedNotFound, match="toynet has no GluonCV classifier"):
        zoo.get_model("ssd_toynet", data_shape=192, pretrained_backbone=True)


def test_the_toy_backbone_leaves_nothing_behind():
    """Run after the test above: its registration and config are gone."""
    assert "toynet" not in BACKBONES and "ssd_toynet" not in zoo.list_models()
    # the registered backbones' names, the toy's no longer among them
    with pytest.raises(zoo.ConfigError, match="one of %s$" % re.escape(", ".join(
            sorted(BACKBONES)))):
        zoo.get_model("ssd_mobilenetv2", backbone="toynet")


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="already registered"):
        register_backbone("resnet50", ToyNet, published_params=1)
    assert BACKBONES["resnet50"]().name == "resnet50"


def _table(heading_line, text):
    """The rows of the first markdown table after the line ``heading_line``, as cell lists."""
    lines = text.split("\n")
    start = lines.index(heading_line)
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def test_the_docs_tables_list_every_registered_backbone():
    with open(DOCS, encoding="utf-8") as stream:
        text = stream.read()
    counts = {re.match(r"`([\w.]+)`", row[0]).group(1): int(row[-1].replace(",", ""))
              for row in _table("## Backbones", text)}
    assert counts == {name: entry.published_params for name, entry in BACKBONES.items()}
    files = {row[0]: row[1] for row in _table("### Pretrained backbones", text)}
    assert files == {name: "`%s-<hash>.params`" % gluoncv.name
                     for name, gluoncv in GLUONCV.items()}
