"""`python -m bench NAME --help` describes a benchmark and runs nothing; an option a
benchmark does not take is refused (exit 2), never ignored."""

from __future__ import annotations

import inspect

import pytest

from bench import __main__ as bench_cli


def _takes_options(name: str) -> bool:
    module = __import__(f"bench.{name}", fromlist=["main"])
    return bool(inspect.signature(module.main).parameters)


@pytest.mark.parametrize("name", bench_cli.discover())
def test_help_runs_nothing(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not _takes_options(name):
        assert bench_cli.main([name, "--help"]) == 2
        assert f"benchmark {name} takes no options" in capsys.readouterr().err
        return
    with pytest.raises(SystemExit) as exited:
        bench_cli.main([name, "--help"])
    assert exited.value.code == 0
    # argparse exits before the benchmark does anything: its usage is the last output
    after_header = capsys.readouterr().out.split(f"== bench {name}\n", 1)[1]
    assert after_header.startswith(f"usage: python -m bench {name}"), after_header


@pytest.mark.parametrize("name", [n for n in bench_cli.discover() if _takes_options(n)])
def test_an_unknown_option_is_refused(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        bench_cli.main([name, "--no-such-option"])
    assert exited.value.code == 2
    assert "--no-such-option" in capsys.readouterr().err
