"""bench/_fwcost.py and bench/_extcpu.py: the framework's cost is measured against the
pre-framework extender's own code, both trees side by side in one process, or the
comparison says why it cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import _fwcost


def test_the_pre_framework_tree_is_exported_from_git_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """extender/ and kube/ at 6b202d9: a server without the framework package."""
    monkeypatch.setattr(_fwcost, "CACHE", tmp_path)
    tree = _fwcost.pre_framework_tree()
    assert tree.parent == tmp_path
    assert (tree / "extender" / "server.py").is_file()
    assert (tree / "kube" / "objects.py").is_file()
    assert not (tree / "extender" / "framework").exists()
    assert _fwcost.pre_framework_tree() == tree  # the second call reuses the export


def test_a_missing_commit_is_reported_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the history (a tarball, a shallow clone) the comparison is skipped with the reason."""
    monkeypatch.setattr(_fwcost, "CACHE", tmp_path)
    monkeypatch.setattr(_fwcost, "PRE_FRAMEWORK", "0" * 40)
    with pytest.raises(_fwcost.Unavailable, match="not in this checkout's git history"):
        _fwcost.pre_framework_tree()


def test_both_trees_answer_every_pod_from_their_own_code(tmp_path: Path) -> None:
    """A small case: each tree's timings come back, one per pod, from the tree named."""
    pre = _fwcost.pre_framework_tree()
    case = tmp_path / "case.json"
    _fwcost.write_case(case, nodes=5, pods=4, warm_up=1)
    timings = _fwcost.run_pair(case, pre)  # raises if an arm ran the other tree's code
    assert {label: len(values) for label, values in timings.items()} == {
        "pre": 4,
        "framework": 4,
    }
    assert all(t > 0 for values in timings.values() for t in values)
