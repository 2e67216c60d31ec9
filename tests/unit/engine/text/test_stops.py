"""engine/text/stops.py: the multi-line policy and the block's scope by indentation, fed as
decoding feeds them (the text as it grows)."""

from __future__ import annotations

import pytest

from ghostfim.engine.text.cursor import CursorContext
from ghostfim.engine.text.stops import StopPolicy, wants_multiline
from ghostfim.engine.tuning import MAX_BLOCK_LINES
from tests.support.text_cases import SAMPLES, at, infill_tasks, policy, stopped


# --- the multi-line policy ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        "def f(x):█\n",
        "function f() {█\n}\n",
        "if x then█\nend\n",
        "for i = 1, n do█\nend\n",
        "local function f(a)█\n",
        "func main() {█\n}\n",
        "int main(void) {█\n",
        "def f(x):\n    █\n",  # an empty line inside a block
        "█",  # an empty file
    ],
)
def test_auto_wants_a_block_after_an_opener_or_on_an_empty_line(source: str) -> None:
    ctx = at(source)
    assert wants_multiline("auto", ctx.line_before, ctx.rest_of_line)
    assert policy(source).multiline


@pytest.mark.parametrize(
    "source",
    [
        "    print(█)\n",  # in the middle of a line
        "if (█) {\n",
        "    x = compute(a)█\n",  # the end of a statement: one line (maybe the next)
        "def f(x):█  # comment\n",
        "local t = {█}\n",
    ],
)
def test_auto_wants_one_line_in_the_middle_or_at_the_end_of_a_statement(source: str) -> None:
    ctx = at(source)
    assert not wants_multiline("auto", ctx.line_before, ctx.rest_of_line)


def test_always_and_never() -> None:
    assert wants_multiline("always", "x = ", "y")
    assert not wants_multiline("never", "def f():", "")


def test_single_line_stops_at_the_first_newline_after_content() -> None:
    assert stopped("def f(a):\n    x = █\n", "compute(a)\n    y = 2\n") == (
        "compute(a)",
        "newline",
    )


def test_single_line_suggestion_may_start_on_the_next_line() -> None:
    text, reason = stopped("    x = 1█\n", "\n    y = 2\n    z = 3\n", mode="never")
    assert (text, reason) == ("\n    y = 2", "newline")


def test_in_the_middle_of_a_line_the_suggestion_never_starts_a_new_line() -> None:
    assert stopped("    print(█)\n", "\n        a,\n        b\n") == ("", "newline")
    assert stopped("    print(█)\n", "a, b\n") == ("a, b", "newline")


def test_block_is_bounded_in_lines() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(20))
    text, reason = stopped("def f():█\n", "\n" + body)
    assert reason == "max_lines" and text.count("\n") == MAX_BLOCK_LINES - 1


# --- the block's scope by indentation ----------------------------------------------------------
def test_python_block_stops_at_a_line_indented_less_than_the_block() -> None:
    text, reason = stopped("def f(x):█\n", "\n    a = x\n    return a\n\ndef g():\n")
    assert reason == "indent" and text.rstrip() == "\n    a = x\n    return a"


def test_js_block_keeps_its_closing_brace_when_nothing_follows() -> None:
    assert stopped("if (x) {█", "\n    y();\n}\nelse {\n") == ("\n    y();\n}", "block_end")


def test_block_stops_before_the_closing_brace_the_editor_inserted() -> None:
    text, reason = stopped("function f() {█\n}\n", "\n    return 1;\n}\n")
    assert (text, reason) == ("\n    return 1;", "suffix")


def test_block_does_not_close_a_block_the_code_below_continues() -> None:
    # Inserting at the top of an existing block: its `}` is further down.
    source = "    if (x) {█\n        g();\n    }\n"
    text, reason = stopped(source, "\n        f();\n    }\n")
    assert (text, reason) == ("\n        f();", "indent")


def test_block_stops_before_a_line_that_closes_and_reopens() -> None:
    text, reason = stopped("if (x) {█", "\n    a();\n} else {\n    b();\n}\n")
    assert (text, reason) == ("\n    a();", "indent")


def test_lua_block_keeps_end_and_knows_endpoint_is_not_end() -> None:
    text, _ = stopped("if ok then█", "\n  endpoint = 1\n  run()\nend\nprint(1)\n")
    assert text == "\n  endpoint = 1\n  run()\nend"


def test_go_block_in_a_tab_indented_file() -> None:
    source = "func main() {█\n}\n"
    text, reason = stopped(source, "\n\tx := 1\n\tfmt.Println(x)\n}\n")
    assert (text, reason) == ("\n\tx := 1\n\tfmt.Println(x)", "suffix")


def test_empty_line_inside_a_block_uses_the_first_lines_indentation() -> None:
    # Cursor at column 0 on an empty line of a body: the model's first line says where the
    # block is, and a line indented less ends the suggestion.
    source = "def f(x):\n    a = 1\n█\n"
    text, reason = stopped(source, "    b = 2\n    return a + b\ndef g():\n")
    assert (text, reason) == ("    b = 2\n    return a + b", "indent")


def test_cursor_inside_leading_whitespace_uses_the_cursor_column() -> None:
    text, reason = stopped("  █", "x = 1\n  y = 2\nz = 3\n")
    assert (text, reason) == ("x = 1\n  y = 2", "indent")


def test_indentation_typed_twice_does_not_end_the_block_early() -> None:
    # The editor indented the empty line; the model wrote the indentation again. The block is
    # where the model's own indentation puts it (post-processing removes the repeat).
    source = "def f(x):\n    █\n"
    text, _ = stopped(source, "    a = x\n    return a\ndef g():\n")
    assert text == "    a = x\n    return a"


def test_stops_before_repeating_the_next_line_of_the_suffix() -> None:
    source = "def f(xs):\n    total = 0\n    for x in xs:\n        █\n    return total\n"
    text, reason = stopped(source, "total += x\n    return total\n")
    assert (text, reason) == ("total += x", "suffix")


def test_a_first_line_repeating_the_next_line_stops_at_once() -> None:
    source = "def f(x):\n    █\n    return x\n"
    assert stopped(source, "return x\n") == ("", "suffix")


def test_repeating_the_code_below_takes_two_lines_when_there_are_two() -> None:
    # Code repeats single lines: a second loop over the same tasks is not the suffix again.
    source = (
        "def cancel_all(loop, tasks):\n    █\n"
        "    for task in tasks:\n        if task.cancelled():\n            continue\n"
    )
    generated = "for task in tasks:\n        task.cancel()\n    loop.run(tasks)\n"
    assert stopped(source, generated) == (generated, "")
    # Both lines again: the model is re-typing the code below.
    generated = "loop.stop()\n    for task in tasks:\n        if task.cancelled():\n"
    assert stopped(source, generated) == ("loop.stop()", "suffix")


def test_a_block_opened_by_a_continued_signature_runs_into_its_body() -> None:
    # C: the parameters continue deeper than the body that follows the `{`.
    source = "static bool reserve(\n        █\n"
    generated = "struct ctx * c, int n) {\n    if (n < 0) {\n        return false;\n    }\n}\n"
    text, reason = stopped(source, generated)
    assert (text, reason) == (generated.rstrip("\n"), "block_end")


def test_a_closer_at_another_depth_is_not_the_next_line() -> None:
    # The `}` below closes the function; the suggestion's `}` closes its own `if`.
    source = "function f(x) {\n    if (x) {█\n}\n"
    text, reason = stopped(source, "\n        g();\n    }\n")
    assert (text, reason) == ("\n        g();\n    }", "block_end")


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_the_stop_rules_never_cut_a_correct_block(language: str) -> None:
    for prefix, middle, suffix in infill_tasks(SAMPLES[language]):
        p = StopPolicy.for_context("always", CursorContext.around(prefix, suffix))
        generated = middle + suffix  # the model goes on past the span: the code below
        for end in [i + 1 for i, ch in enumerate(generated) if ch == "\n"]:
            d = p.check(generated[:end])
            if d.stop:
                kept = generated[:end][: d.keep] if d.keep >= 0 else generated[:end]
                bounded = d.reason == "max_lines" and middle.startswith(kept)
                assert kept.startswith(middle) or bounded, (prefix[-40:], middle, kept)
                break
