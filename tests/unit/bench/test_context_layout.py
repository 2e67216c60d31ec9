"""bench/context_layout.py's pure parts: the windows, the prompt of each layout, the scores and
the pick order (no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.context_layout import (
    GIVEN,
    NOT_GIVEN,
    Summary,
    assemble,
    build_prompt,
    cursor_offset,
    interleave,
    levenshtein,
    prefix_window,
    render,
    report,
    ring_chunks,
    score,
    stubs_code,
    suffix_window,
    summarize,
)
from ghostfim.engine.context.definitions import ContextEntry, DefinitionBlock

BLOCK = DefinitionBlock(
    "python",
    (
        ContextEntry("make", "pkg/a.py", "def make(x: int) -> Thing:"),
        ContextEntry("Thing", "pkg/b.py", "class Thing:\n    size: int"),
    ),
)
EMPTY = DefinitionBlock("python", ())


def prompt(layout: str, block: DefinitionBlock = BLOCK) -> str:
    context, fim = build_prompt(layout, "def f():\n    ", "\nreturn 1", block, "proj", "pkg/c.py")
    return render(assemble(layout, context, fim))


def test_plain_fim_is_psm() -> None:
    assert prompt("none") == ("<|fim_prefix|>def f():\n    <|fim_suffix|>\nreturn 1<|fim_middle|>")


def test_comment_block_opens_the_prefix() -> None:
    assert prompt("comment") == (
        "<|fim_prefix|># pkg/a.py:\n#   def make(x: int) -> Thing:\n# pkg/b.py:\n"
        "#   class Thing:\n#       size: int\n\n"
        "def f():\n    <|fim_suffix|>\nreturn 1<|fim_middle|>"
    )


def test_repo_layout_is_qwens() -> None:
    assert prompt("repo") == (
        "<|repo_name|>proj\n"
        "<|file_sep|>pkg/a.py\ndef make(x: int) -> Thing:\n"
        "<|file_sep|>pkg/b.py\nclass Thing:\n    size: int\n"
        "<|file_sep|>pkg/c.py\n"
        "<|fim_prefix|>def f():\n    <|fim_suffix|>\nreturn 1<|fim_middle|>"
    )


def test_stubs_above_are_code_under_a_file_line() -> None:
    assert stubs_code(BLOCK) == (
        "# pkg/a.py\ndef make(x: int) -> Thing:\n\n# pkg/b.py\nclass Thing:\n    size: int\n\n"
    )
    assert prompt("stubs-above").startswith("<|fim_prefix|># pkg/a.py\ndef make(")
    assert prompt("stubs-above").endswith("def f():\n    <|fim_suffix|>\nreturn 1<|fim_middle|>")


@pytest.mark.parametrize("layout", ["comment", "repo", "stubs-above"])
def test_no_definitions_is_plain_fim(layout: str) -> None:
    assert prompt(layout, EMPTY) == prompt("none")


RING = [("pkg/d.py", "import os\n\ndef helper():\n    return os.sep")]


def test_the_ring_in_its_repo_layout_and_as_code_opening_the_prefix() -> None:
    def ring_prompt(layout: str, ring: list[tuple[str, str]] = RING) -> str:
        context, fim = build_prompt(
            layout, "x = ", "\n", EMPTY, "proj", "pkg/c.py", [("pkg/e.py", "y = 2")], ring
        )
        return render(assemble(layout, context, fim))

    assert ring_prompt("ring-repo") == (
        "<|repo_name|>proj\n<|file_sep|>pkg/d.py\nimport os\n\ndef helper():\n    return os.sep\n"
        "<|file_sep|>pkg/c.py\n<|fim_prefix|>x = <|fim_suffix|>\n<|fim_middle|>"
    )
    assert ring_prompt("ring-code") == (
        "<|fim_prefix|># pkg/d.py\nimport os\n\ndef helper():\n    return os.sep\n\n"
        "x = <|fim_suffix|>\n<|fim_middle|>"
    )
    assert ring_prompt("ring+snip").startswith(
        "<|fim_prefix|># pkg/d.py\nimport os\n\ndef helper():\n    return os.sep\n\n"
        "# pkg/e.py\ny = 2\n\n"
    )
    for layout in ("ring-repo", "ring-code", "ring+snip"):  # an empty ring: plain FIM
        assert ring_prompt(layout, []) == "<|fim_prefix|>x = <|fim_suffix|>\n<|fim_middle|>"


def test_unknown_layout() -> None:
    with pytest.raises(ValueError):
        prompt("sideways")


def test_windows_cut_at_lines_and_keep_the_cursor_line() -> None:
    count = len  # one token per character
    doc = "aaaa\nbbbb\ncccc\n    \ndddd\neeee\n"
    at = cursor_offset(doc, 3, "    ")
    assert doc[:at].endswith("cccc\n    ")
    assert prefix_window(doc[:at], 10, count) == "cccc\n    "
    assert prefix_window(doc[:at], 1, count) == "    "  # the cursor's own line stays
    assert prefix_window(doc[:at], 100, count) == doc[:at]
    assert suffix_window(doc[at:], 5, count) == "\ndddd"
    assert suffix_window(doc[at:], 0, count) == ""


def test_scores() -> None:
    s = score("foo(bar)  \nmore", "foo(bar)")
    assert s.exact and s.prefix_share == 1.0 and s.edit_sim == 1.0
    s = score("foo(baz)", "foo(bar)")
    assert not s.exact
    assert s.prefix_share == pytest.approx(6 / 8)
    assert s.edit_sim == pytest.approx(7 / 8)
    assert score("", "abcd").prefix_share == 0.0
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3


def test_summary_counts_context_only_where_given() -> None:
    summary = Summary()
    summary.add("cross", "comment", score("a", "a"), 100)
    summary.add("cross", "comment", score("b", "a"), 0)
    summary.add("plain", "comment", score("a", "a"), 50)
    cross = summary.cells[("cross", "comment")]
    assert (cross.n, cross.exact, cross.with_context, cross.context_tokens) == (2, 1, 1, 100)
    assert summary.cells[("all", "comment")].n == 3
    table = summary.table(["comment"])
    assert "| cross | comment | 2 | 1/2 (0.500) | 0.500 |" in table
    assert "| 1 | 100 |" in table


def test_interleave_is_round_robin_over_package_and_kind() -> None:
    picks = [
        {"package": p, "kind": k, "i": i}
        for p in ("a", "b")
        for k in ("cross", "plain")
        for i in range(2)
    ]
    order = [(p["package"], p["kind"], p["i"]) for p in interleave(picks, ["cross", "plain"])]
    assert order[:4] == [("a", "cross", 0), ("a", "plain", 0), ("b", "cross", 0), ("b", "plain", 0)]
    assert sorted(order) == sorted((p["package"], p["kind"], p["i"]) for p in picks)
    only = interleave(picks, ["cross"])
    assert [(p["package"], p["i"]) for p in only] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]


def test_summarize_rescores_and_splits_cross_by_the_name_given() -> None:
    def record(kind: str, given: bool, generated: str) -> dict:
        entry = {"generated": generated, "context_tokens": 10}
        return {
            "kind": kind,
            "expected": "x = f(1)",
            "used_name_given": given,
            "layouts": {"comment": entry},
        }

    records = [record("cross", True, "x = f(1)"), record("cross", False, "  x = f(1)")]
    strict = summarize(records, ["comment"])
    assert strict.cells[("cross", "comment")].exact == 1
    assert strict.cells[(GIVEN, "comment")].exact == 1
    assert strict.cells[(NOT_GIVEN, "comment")].exact == 0
    assert summarize(records, ["comment"], lenient=True).cells[("cross", "comment")].exact == 2
    assert "| cross, name in block | comment | 1 | 1/1 (1.000) |" in report(records, ["comment"])


def count(s: str) -> int:
    return len(s) // 4


def test_the_ring_holds_the_tops_of_the_nearest_files_opened_before(tmp_path: Path) -> None:
    body = "import os\n\n\ndef {name}(path):\n    return os.path.join(path, '{name}')\n"
    for name in ("a", "b", "c", "d", "e"):
        (tmp_path / f"{name}.py").write_text(body.format(name=name))
    chunks = ring_chunks(tmp_path / "c.py", "x = 1\n", 2, 512, count)
    assert sorted(Path(f).name for f, _ in chunks) == ["b.py", "d.py"]  # the nearest two
    assert all(text.startswith("import os") for _, text in chunks)  # each file's top
    assert ring_chunks(tmp_path / "c.py", "x = 1\n", 2, 10, count) == []  # nothing fits
    held = body.format(name="b")  # a chunk the prompt's own window holds is left out
    assert [Path(f).name for f, _ in ring_chunks(tmp_path / "c.py", held, 2, 512, count)] == [
        "d.py"
    ]
