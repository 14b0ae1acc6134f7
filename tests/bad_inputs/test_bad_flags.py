"""Bad flags and bad command-line input, through ``zoo.cli.main``: each is one line on
stderr, ``zoo COMMAND: error: ...`` naming the flag or file, no traceback; a value refused
while parsing exits 2, any other user error 1."""
import mxnet as mx
import pytest

from zoo.cli import main

NETWORK = "ssd_mobilenetv2_stride8"
TRAIN = ["train", "--network", NETWORK]

# (argv, exit status, texts the error line holds after "zoo COMMAND: error: ")
PARSE_ERRORS = [
    (TRAIN + ["--batch-size", "0"], ["argument --batch-size", "integer >= 1", "'0'"]),
    (TRAIN + ["--batch-size", "four"], ["argument --batch-size", "'four'"]),
    (TRAIN + ["--lr", "nan"], ["argument --lr", "finite number > 0", "'nan'"]),
    (TRAIN + ["--lr", "inf"], ["argument --lr", "'inf'"]),
    (TRAIN + ["--lr", "-0.1"], ["argument --lr", "'-0.1'"]),
    (TRAIN + ["--ctx", "gpu99"], ["argument --ctx", "'gpu99'", "MXNet sees"]),
    (TRAIN + ["--ctx", "gpu"], ["argument --ctx", "'cpu' or 'gpuN[,M...]'", "'gpu'"]),
    (TRAIN + ["--ctx", "tpu0"], ["argument --ctx", "'tpu0'"]),
    (["train", "--network", "nope"], ["argument --network", "a registered model", "'nope'"]),
    (["train", "--network", "missing.yaml"], ["argument --network", "'missing.yaml'"]),
    (TRAIN + ["--val-interval", "0"], ["argument --val-interval", "'0'"]),
    (TRAIN + ["--data-threads", "-1"], ["argument --data-threads", "'-1'"]),
    (TRAIN + ["--lr-steps", "abc"], ["argument --lr-steps", "'abc'"]),
    (TRAIN + ["--lr-steps", "4,-2"], ["argument --lr-steps", "'-2'"]),
    (TRAIN + ["--epochs", "0"], ["argument --epochs", "'0'"]),
    (TRAIN + ["--epochs", "2.5"], ["argument --epochs", "'2.5'"]),
    (TRAIN + ["--momentum", "1.5"], ["argument --momentum", "< 1", "'1.5'"]),
    (TRAIN + ["--wd", "-1"], ["argument --wd", "'-1'"]),
    (TRAIN + ["--clip-gradient", "0"], ["argument --clip-gradient", "'0'"]),
    (TRAIN + ["--max-expand", "0.5"], ["argument --max-expand", ">= 1", "'0.5'"]),
    (TRAIN + ["--warmup-epochs", "-1"], ["argument --warmup-epochs", "'-1'"]),
    (TRAIN + ["--keep-last", "0"], ["argument --keep-last", "'0'"]),
    (TRAIN + ["--data-shape", "0"], ["argument --data-shape", "'0'"]),
    (TRAIN + ["--optimizer", "adagrad"], ["argument --optimizer", "invalid choice", "'adagrad'"]),
    (TRAIN + ["--dataset", "imagenet"], ["argument --dataset", "'imagenet'"]),
    (TRAIN + ["--kv-store", "nccl"], ["argument --kv-store", "'nccl'"]),
    (TRAIN + ["--seed", "-1"], ["argument --seed", "'-1'"]),
    (TRAIN + ["--nope"], ["unrecognized arguments: --nope"]),
    (["train"], ["one of the arguments --network --init-from is required"]),
    (["eval", "--checkpoint", "x", "--data-root", "nowhere"],
     ["argument --data-root", "'nowhere'", "no such folder"]),
    (["export", "--checkpoint", "x", "--output", "y", "--int8", "--data-root", "nowhere"],
     ["argument --data-root", "'nowhere'", "no such folder"]),
    (["eval", "--checkpoint", "x", "--data-root", ".", "--epoch", "-1"], ["argument --epoch",
                                                                          "'-1'"]),
    (["demo", "--checkpoint", "x", "--image", "y", "--threshold", "2"],
     ["argument --threshold", "<= 1", "'2'"]),
    (["quantize", "--checkpoint", "x", "--data-root", ".", "--calib-mode", "kl"],
     ["argument --calib-mode", "'kl'"]),
    (["quantize", "--checkpoint", "x", "--data-root", ".", "--calib-batches", "0"],
     ["argument --calib-batches", "'0'"]),
    (["export", "--checkpoint", "x", "--network", NETWORK, "--output", "y"],
     ["argument --network", "not allowed with argument --checkpoint"]),
    (["benchmark", "--network", NETWORK, "--batch-sizes", "1,0"],
     ["argument --batch-sizes", "'0'"]),
    (["benchmark", "--network", NETWORK, "--dtypes", "fp16"], ["argument --dtypes", "'fp16'"]),
    (["benchmark-detector", "--threshold", "-1"], ["argument --threshold/--score-threshold",
                                                   "'-1'"]),
    (["benchmark-detector", "--score-threshold", "-1"],  # the old name, still taken
     ["argument --threshold/--score-threshold", "'-1'"]),
    (["benchmark-memory", "--network", "nope"], ["argument --network", "'nope'"]),
    (["launch", "-n", "0", "--", "true"], ["argument -n/--num-workers", "'0'"]),
    (["quickstart", "--epochs", "0"], ["argument --epochs", "'0'"]),
    (["prepare-data", "--format", "yolo", "--output", "x"], ["argument --format", "'yolo'"]),
]


def run(argv, capsys):
    """``(exit status, the one line on stderr)``."""
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return status, err.rstrip("\n")


@pytest.mark.parametrize("argv, texts", PARSE_ERRORS,
                         ids=[" ".join(argv[3:] if argv[:3] == TRAIN else argv)
                              for argv, _ in PARSE_ERRORS])
def test_a_bad_flag_is_refused_while_parsing(argv, texts, capsys):
    status, line = run(argv, capsys)
    assert status == 2
    assert line.startswith("zoo %s: error: " % argv[0]), line
    for text in texts:
        assert text in line, (text, line)


@pytest.mark.skipif(mx.context.num_gpus() > 0, reason="this machine has a GPU")
def test_a_gpu_without_one(capsys):
    status, line = run(TRAIN + ["--ctx", "gpu0"], capsys)
    assert status == 2
    assert line == ("zoo train: error: argument --ctx: must name GPUs this machine has, got "
                    "'gpu0': MXNet sees no GPU (a CPU-only build, or no driver)")


def test_an_unknown_command(capsys):
    status, line = run(["trian"], capsys)
    assert status == 2 and line.startswith("zoo: error: argument COMMAND: invalid choice: "
                                           "'trian'")


def data_flags(shapes, output):
    return ["--dataset", "voc", "--data-root", shapes, "--data-shape", "128", "--batch-size",
            "2", "--output-dir", str(output), "--no-progress"]


def test_a_batch_larger_than_the_data(shapes, tmp_path, capsys):
    status, line = run(TRAIN + data_flags(shapes, tmp_path) + ["--batch-size", "9"], capsys)
    assert status == 1
    assert line == ("zoo train: error: batch_size 9 is larger than the 8 training images of "
                    "voc:%s/train: no full batch to train on; lower --batch-size" % shapes)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--freeze", "--freeze-bn"])
def test_a_bad_freeze_pattern_is_refused_before_anything_is_written(shapes, tmp_path, capsys,
                                                                    flag):
    # checked once, by the trainer's options, which the job builds before it starts
    status, line = run(TRAIN + data_flags(shapes, tmp_path) + [flag, "["], capsys)
    assert status == 1
    assert line == ("zoo train: error: %s '[' is not a regular expression: unterminated "
                    "character set at position 0" % flag[2:].replace("-", "_"))
    assert not list(tmp_path.iterdir())


# (argv given the dataset folder and a scratch folder, the error line after the prefix)
USER_ERRORS = [
    (lambda d, t: TRAIN + data_flags(d, t) + ["--train-split", "nope"],
     lambda d, t: "%s/ImageSets/Main/nope.txt: no image set 'nope'; available: train, "
                  "trainval, val" % d),
    (lambda d, t: TRAIN + data_flags(str(t / "nowhere"), t),
     lambda d, t: "%s: not a VOC folder (no such directory)" % (t / "nowhere")),
    (lambda d, t: TRAIN + data_flags(d, t) + ["--resume", str(t / "none")],
     lambda d, t: "no complete checkpoint %s-NNNN.params/.json to resume from" % (t / "none")),
    (lambda d, t: TRAIN + data_flags(d, t / "file" / "out"),
     lambda d, t: "%s: Not a directory" % (t / "file" / "out")),
    (lambda d, t: ["eval", "--checkpoint", str(t / "none"), "--data-root", d],
     lambda d, t: "no complete artifact %s-NNNN.params/.json" % (t / "none")),
    (lambda d, t: ["plot-log", str(t / "none.csv")],
     lambda d, t: "%s: No such file or directory" % (t / "none.csv")),
    (lambda d, t: ["plot-log", str(t / "file")],
     lambda d, t: "%s: no 'epoch' column (columns: not a log)" % (t / "file")),
    (lambda d, t: ["prepare-data", "--format", "voc", "--output", str(t / "x")],
     lambda d, t: "format voc needs root"),
    (lambda d, t: ["launch", "-n", "1"], lambda d, t: "give the worker command after '--'"),
    (lambda d, t: ["benchmark-detector", "--images", str(t / "nowhere")],
     lambda d, t: "--images %s: cannot list the folder: No such file or directory"
                  % (t / "nowhere")),
]


@pytest.mark.parametrize("argv, expected", USER_ERRORS, ids=[
    "train-split", "data-root", "resume", "output-dir", "eval", "plot-log-missing",
    "plot-log-not-csv", "prepare-data", "launch", "benchmark-detector"])
def test_a_user_error_is_one_line_exit_1(shapes, tmp_path, capsys, argv, expected):
    (tmp_path / "file").write_text("not a log\n")
    argv = argv(shapes, tmp_path)
    status, line = run(argv, capsys)
    assert status == 1
    assert line == "zoo %s: error: %s" % (argv[0], expected(shapes, tmp_path))
