"""Parameter names are the storage format, the GluonCV import map and the targets of users'
``--freeze`` patterns: they must stay byte-identical. ``tests/data/param_names.json`` pins,
per registered model, the count and the sha256 of the sorted names (trainable parameters
and batch-norm statistics) of both the inference and the training graph. ``make param-names``
regenerates it (running this file), for a model added or a change of names meant."""
import hashlib
import json
import os

import pytest

import zoo
from factories import ROOT

PINNED = os.path.join(ROOT, "tests", "data", "param_names.json")
REGENERATE = ("the parameter names differ from %s: where that is meant (a model added, or "
              "parameters renamed, which breaks stored artifacts and --freeze patterns), "
              "regenerate it with `make param-names`" % os.path.relpath(PINNED))


def param_names(model, symbol):
    inputs = set(model.train_input_shapes())
    return sorted([n for n in symbol.list_arguments() if n not in inputs]
                  + symbol.list_auxiliary_states())


def digest(names):
    return {"count": len(names), "sha256": hashlib.sha256("\n".join(names).encode()).hexdigest()}


def pinned_now():
    """``{model: digest}`` of every registered model as built now (at its smallest shape),
    what :data:`PINNED` holds."""
    digests = {}
    for name in zoo.list_models():
        model = zoo.get_model(name, data_shape=min(zoo.get_config(name)["shapes"]))
        digests[name] = digest(param_names(model, model.symbol()))
    return digests


def test_every_registered_model_is_pinned():
    with open(PINNED) as stream:
        assert sorted(json.load(stream)) == zoo.list_models(), REGENERATE


@pytest.mark.parametrize("name", zoo.list_models())
def test_parameter_names_are_unchanged(models, name):
    with open(PINNED) as stream:
        pinned = json.load(stream)[name]
    model = models[name]
    assert digest(param_names(model, model.symbol())) == pinned, REGENERATE
    assert digest(param_names(model, model.train_symbol())) == pinned, \
        "the training graph's parameters differ from the inference graph's"


if __name__ == "__main__":
    with open(PINNED, "w") as stream:
        json.dump(pinned_now(), stream, indent=1, sort_keys=True)
        stream.write("\n")
    print("wrote %s" % os.path.relpath(PINNED))
