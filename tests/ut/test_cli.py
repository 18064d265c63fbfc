"""The command line: help everywhere, and every bad option refused before anything runs."""
import pytest

from mindspore_bn_grad.__main__ import COMMANDS, main
from mindspore_bn_grad.cli import demo


def _exit_code(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


@pytest.mark.parametrize("argv", [[], ["help"], ["-h"], ["--help"]])
def test_help_lists_every_command(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    for command in ("help", *COMMANDS):
        assert f"\n  {command} " in out, command


def test_unknown_command_and_unknown_help_topic_exit_2(capsys):
    assert main(["nosuch"]) == 2
    assert "unknown command 'nosuch'" in capsys.readouterr().err
    assert main(["help", "nosuch"]) == 2
    assert "unknown command 'nosuch'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["example", "demo", "support"])
@pytest.mark.parametrize("spelling", ["--help", "help"])
def test_command_help_prints_help_and_runs_nothing(command, spelling, capsys):
    argv = [command, "--help"] if spelling == "--help" else ["help", command]
    assert _exit_code(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m mindspore_bn_grad {command}"), out
    for ran in ("gradWeight =", "digits:", "test accuracy:", "product line"):  # what each prints when it runs
        assert ran not in out, out


def test_every_demo_option_says_what_it_is():
    options = [a for a in demo.parser()._actions if a.option_strings and a.dest != "help"]  # pylint: disable=protected-access
    assert {a.dest for a in options} == {"epochs", "batch_size", "lr", "seed", "mode"}
    assert all(a.help and len(a.help) > 10 for a in options)


@pytest.mark.parametrize("argv, message", [
    (["--epochs", "0"], "argument --epochs: expected an integer >= 1, got 0"),
    (["--epochs", "-3"], "argument --epochs: expected an integer >= 1, got -3"),
    (["--batch-size", "0"], "argument --batch-size: expected an integer >= 1, got 0"),
    (["--batch-size", "5000"], "argument --batch-size: expected at most the 1438 training images, got 5000"),
    (["--lr", "0"], "argument --lr: expected a finite number > 0, got '0'"),
    (["--mode", "eager"], "argument --mode: expected one of GRAPH, PYNATIVE (any case), got 'eager'"),
])
def test_demo_refuses_bad_options(argv, message, capsys):
    assert _exit_code(["demo", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("given, mode", [("GRAPH", "GRAPH"), ("graph", "GRAPH"), ("PyNative", "PYNATIVE")])
def test_demo_and_bench_spell_modes_alike(given, mode):
    from mindspore_bn_grad_bench import train
    assert demo.parse_args(["--mode", given]).mode == mode
    assert train.parse_args(["--modes", given]).modes == [mode]


@pytest.mark.parametrize("argv", [["--threads", "0"], ["--double", "--threads", "0"], ["--threads", "-1"]])
def test_bench_refuses_a_thread_count_below_one(argv, capsys):
    assert _exit_code(["bench", *argv]) == 2
    assert "argument --threads: expected an integer >= 1" in capsys.readouterr().err


def test_demo_batch_size_bound_is_the_training_split():
    pytest.importorskip("sklearn")
    assert len(demo.load_digits_split(0)[1]) == demo.N_TRAIN
