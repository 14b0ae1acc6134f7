"""Parameter names are the storage format, the GluonCV import map and the targets of users'
``--freeze`` patterns: they must stay byte-identical. ``tests/data/param_names.json`` pins,
per registered model, the count and the sha256 of the sorted names (trainable parameters
and batch-norm statistics) of both the inference and the training graph."""
import hashlib
import json
import os

import pytest

import zoo
from factories import ROOT

PINNED = os.path.join(ROOT, "tests", "data", "param_names.json")


def param_names(model, symbol):
    inputs = set(model.train_input_shapes())
    return sorted([n for n in symbol.list_arguments() if n not in inputs]
                  + symbol.list_auxiliary_states())


def digest(names):
    return {"count": len(names), "sha256": hashlib.sha256("\n".join(names).encode()).hexdigest()}


def test_every_registered_model_is_pinned():
    with open(PINNED) as stream:
        assert sorted(json.load(stream)) == zoo.list_models()


@pytest.mark.parametrize("name", zoo.list_models())
def test_parameter_names_are_unchanged(models, name):
    with open(PINNED) as stream:
        pinned = json.load(stream)[name]
    model = models[name]
    assert digest(param_names(model, model.symbol())) == pinned
    assert digest(param_names(model, model.train_symbol())) == pinned
