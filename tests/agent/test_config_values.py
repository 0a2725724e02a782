"""Flag values: Go durations, listen addresses, the state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import cli, config, predictor


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("500ms", 0.5), ("1m30s", 90.0), ("2h", 7200.0), (" 10s ", 10.0)],
)
def test_durations(text: str, seconds: float) -> None:
    """Go-style durations are read in seconds."""
    assert config.parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1", "not a duration"),
        ("10x", "not a duration"),
        ("0s", "greater than zero"),
        ("-1s", "greater than zero"),
    ],
)
def test_bad_durations(text: str, message: str) -> None:
    """Unitless, unknown units and non-positive durations are refused with a reason."""
    with pytest.raises(ValueError, match=message):
        config.parse_duration(text)


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        (":9316", "", 9316),
        ("127.0.0.1:0", "127.0.0.1", 0),
        ("node-a.example:8080", "node-a.example", 8080),
        ("[::1]:9316", "::1", 9316),
    ],
)
def test_listen_addresses(text: str, host: str, port: int) -> None:
    """host:port, :port and [ipv6]:port."""
    assert config.parse_listen_address(text) == config.ListenAddress(host, port)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9316", "expected host:port"),
        (":http", "port must be a number"),
        (":70000", "port must be a number"),
        ("::1:9316", "IPv6 host in brackets"),
        ("[nothost]:1", "not an IPv6 address"),
        ("bad_host!:1", "not a valid host"),
    ],
)
def test_bad_listen_addresses(text: str, message: str) -> None:
    """Malformed addresses are refused with a reason."""
    with pytest.raises(ValueError, match=message):
        config.parse_listen_address(text)


def test_state_dir_follows_xdg(tmp_path: Path) -> None:
    """$XDG_STATE_HOME/nodeqos when set to an absolute path, else ~/.local/state/nodeqos."""
    assert config.default_state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "nodeqos"
    fallback = Path.home() / ".local" / "state" / "nodeqos"
    assert config.default_state_dir({}) == fallback
    assert config.default_state_dir({"XDG_STATE_HOME": "relative"}) == fallback
    assert config.default_metric_cache_path({"XDG_STATE_HOME": str(tmp_path)}) == (
        tmp_path / "nodeqos" / "metriccache.db"
    )


def test_prediction_flag_defaults_are_koordlets() -> None:
    """--prediction-* defaults parse to PredictorConfig's (koordlet's): 24h, 10%, 12h, 24h, 1m, 10m."""
    command = cli.build_command()
    defaults = {
        p.name: p.default
        for p in command.params
        if p.name is not None and p.name.startswith("prediction_")
    }
    parsed = {
        k: v if not isinstance(v, str) else config.parse_duration(v) for k, v in defaults.items()
    }
    assert parsed == {
        "prediction_cold_start_duration": 86400.0,
        "prediction_safety_margin_percent": 10,
        "prediction_cpu_histogram_decay_halflife": 43200.0,
        "prediction_memory_histogram_decay_halflife": 86400.0,
        "prediction_training_interval": 60.0,
        "prediction_model_checkpoint_interval": 600.0,
    }
    d = predictor.PredictorConfig()
    assert list(parsed.values()) == [
        d.cold_start,
        d.safety_margin_percent,
        d.cpu_half_life,
        d.memory_half_life,
        d.training_interval,
        d.checkpoint_interval,
    ]
