"""Where the daemon serves /metrics and /healthz: flag, else the file's addresses, else :10258."""

from __future__ import annotations

import pathlib

import pytest

from descheduler import app, cli, config
from descheduler.plugins import in_tree

HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"


@pytest.mark.parametrize(
    ("body", "options", "expected"),
    [
        pytest.param("", app.Options(), ["0.0.0.0:10258"], id="default"),
        pytest.param(
            "metricsBindAddress: 0.0.0.0:10251\nhealthzBindAddress: 0.0.0.0:10251\n",
            app.Options(),
            ["0.0.0.0:10251"],
            id="koordinator-file-keeps-its-port",
        ),
        pytest.param(
            "metricsBindAddress: :9000\nhealthzBindAddress: 127.0.0.1:9001\n",
            app.Options(),
            ["0.0.0.0:9000", "127.0.0.1:9001"],
            id="two-addresses",
        ),
        pytest.param(
            "metricsBindAddress: :9000\n",
            app.Options(metrics_addr="127.0.0.1:0"),
            ["127.0.0.1:0"],
            id="flag-wins",
        ),
        pytest.param("", app.Options(once=True), [], id="once-serves-nothing"),
        pytest.param(
            "", app.Options(once=True, metrics_addr=":1"), [":1"], id="once-serves-when-asked"
        ),
    ],
)
def test_listen_addresses(
    tmp_path: pathlib.Path, body: str, options: app.Options, expected: list[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(HEAD + body)
    assert (
        cli.listen_addresses(path, config.load_config(path, plugins=in_tree()), options) == expected
    )
