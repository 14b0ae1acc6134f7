"""Bad-input corpus, bounded parsing: a config's YAML may not set a key twice or expand its
aliases without bound, an error quotes a bounded part of any value, and the lr schedule is
checked by the zoo (flags and options) before anything is written."""
import os
import textwrap

import pytest

import zoo
from zoo.cli import main

SSD = "base: ssd_mobilenetv2_stride8\n"


def write(tmp_path, text, name="my_ssd"):
    path = tmp_path / (name + ".yaml")
    path.write_text(textwrap.dedent(text))
    return str(path)


def check_fails(path, capsys):
    """``zoo check PATH`` fails (exit 1) printing one FAIL line; returns it."""
    assert main(["check", path]) == 1
    captured = capsys.readouterr()
    out = captured.out + captured.err
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1, out
    return fails[0]


@pytest.mark.parametrize("text, key, lines", [
    (SSD + "nms_threshold: 0.5\ntopk: 10\nnms_threshold: 0.4\n", "nms_threshold", (2, 4)),
    (SSD + "shapes:\n  192:\n    steps: [8, 16, 32, 64, 96]\n    steps: [8, 16, 32, 64, 97]\n",
     "steps", (4, 5)),
    (SSD + "shapes:\n  192: {}\n  192: {}\n", 192, (3, 4)),
    (SSD + "base: ssd_mobilenetv2\n", "base", (1, 2)),
])
def test_a_key_set_twice_names_the_key_and_both_lines(tmp_path, capsys, text, key, lines):
    path = write(tmp_path, text)
    with pytest.raises(zoo.ConfigError) as caught:
        zoo.load_config(path)
    message = str(caught.value)
    assert "key %r is set twice, on lines %d and %d" % ((key,) + lines) in message
    assert "%s:%d" % (path, lines[1]) in message and "\n" not in message
    assert "set twice" in check_fails(path, capsys)


def test_a_merge_may_still_override_what_it_merges(tmp_path):
    # As the registry's ssd_mobilenetv2.yaml does: the merged key is no duplicate.
    merged = write(tmp_path, SSD + "shapes:\n  192: &shape\n    steps: [8, 16, 32, 64, 96]\n"
                   "  256:\n    <<: *shape\n    steps: [8, 16, 32, 64, 128]\n", name="merged")
    from zoo.config.loading import resolve
    assert resolve(zoo.load_config(merged), {"data_shape": 256})["steps"][-1] == 128


LAUGHS = SSD + 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    "%s: &%s [%s]\n" % (name, name, ",".join(["*" + previous] * 9))
    for previous, name in zip("abcdefgh", "bcdefghi"))


def test_a_billion_laughs_is_refused_quickly_in_one_line(tmp_path, capsys):
    path = write(tmp_path, LAUGHS)
    assert os.path.getsize(path) < 600
    line = check_fails(path, capsys)
    assert "aliases expand the document past 100000 nodes" in line and len(line) < 400


def test_an_alias_inside_itself_is_refused(tmp_path, capsys):
    path = write(tmp_path, SSD + "steps: &s [8, *s]\n")
    assert "an alias refers to the node that holds it" in check_fails(path, capsys)


def test_aliases_within_the_bound_still_load(tmp_path):
    path = write(tmp_path, SSD + "mean_pixels: &m [123, 117, 104]\nstd_pixels: *m\n")
    assert zoo.load_config(path)["std_pixels"] == [123, 117, 104]


@pytest.mark.parametrize("value", [
    list(range(5000)),
    "x" * 100000,
    {"k%d" % i: list(range(100)) for i in range(1000)},
])
def test_an_error_quotes_a_bounded_part_of_a_long_value(value):
    with pytest.raises(zoo.ConfigError) as caught:
        zoo.get_model("ssd_mobilenetv2_stride8", sizes=value)
    message = str(caught.value)
    assert len(message) < 600 and "..." in message and "\n" not in message


# -- The lr schedule --------------------------------------------------------------------------

@pytest.mark.parametrize("steps", ["2,1", "1,1", "3,2,4"])
def test_lr_steps_not_increasing_are_a_flag_error(steps, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["train", "--network", "ssd_mobilenetv2_stride8", "--lr-steps", steps])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "--lr-steps: must strictly increase, got %r" % steps in err


@pytest.mark.parametrize("steps", [(2, 1), (1, 1), (-1,), (1, float("nan"))])
def test_lr_steps_not_increasing_are_refused_by_the_options(steps):
    from zoo.engine.trainer import OptimizerOptions
    from zoo.errors import OptionsError
    with pytest.raises(OptionsError, match="lr_steps .*: expected epochs >= 0 in strictly "
                                           "increasing order"):
        OptimizerOptions(lr_steps=steps)


@pytest.mark.parametrize("steps, warmup, same", [
    ((1, 1.1), 0.0, "epochs 1 and 1.1 both drop the lr at update 4 (4 updates per epoch)"),
    ((0.1, 0.2), 1.0, "epochs 0.1 and 0.2 both drop the lr at update 5 (4 updates per epoch, "
                      "warm-up to update 4)"),
])
def test_lr_steps_on_one_update_are_one_line_before_anything_is_written(
        tmp_path, capsys, steps, warmup, same):
    from zoo.data import embedded
    shapes = embedded.generate(str(tmp_path / "shapes"), seed=1, num_train=8, num_val=2,
                               image_size=64)
    output = tmp_path / "run"
    status = main(["train", "--network", "ssd_mobilenetv2_stride8", "--dataset", "voc",
                   "--data-root", shapes, "--data-shape", "128", "--batch-size", "2",
                   "--epochs", "2", "--val-split", "", "--output-dir", str(output),
                   "--no-progress", "--data-threads", "1", "--warmup-epochs", str(warmup),
                   "--lr-steps", ",".join(map(str, steps))])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert same in err
    assert not output.exists() or os.listdir(output) == []


def test_a_long_unknown_key_is_quoted_bounded(tmp_path, capsys):
    # YAML caps a plain key at 1024 characters; an explicit one (``? KEY``) has no cap.
    path = write(tmp_path, SSD + "? nms_%s\n: 1\n" % ("x" * 50000))
    line = check_fails(path, capsys)
    assert "unknown config field" in line and len(line) < 2000
