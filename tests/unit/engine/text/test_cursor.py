"""engine/text/cursor.py: the cursor's surroundings, block openers and closers, indentation."""

from __future__ import annotations

import pytest

from ghostfim.engine.text.cursor import closes_block, indent_style, opens_block
from tests.support.text_cases import at


# --- the cursor context ------------------------------------------------------------------------
def test_cursor_context_names_the_text_around_the_cursor() -> None:
    ctx = at("def f(x):\n    y = x\n    █ + 1\n    return y\n")
    assert ctx.line_before == "    "
    assert ctx.rest_of_line == " + 1"
    assert ctx.lines_above == ("def f(x):", "    y = x")
    assert ctx.lines_below[:2] == ("    return y", "")
    assert ctx.cursor_in_indentation and ctx.mid_line
    assert ctx.line_above == "    y = x" and ctx.line_below == "    return y"


@pytest.mark.parametrize(
    "line",
    [
        "def f(x):",  # Python
        "    if x > 0:",
        "function f(a, b) {",  # JS
        "const g = (a) =>",  # TS arrow
        "for (int i = 0; i < n; i++) {",  # C
        "func main() {",  # Go
        "if x then",  # Lua
        "for i = 1, n do",
        "local function f(a, b)",
        "M.handler = function(req)",
        "items.each do |item|",  # Ruby
        "x = foo(",  # an open call
        "while true; do",  # shell
    ],
)
def test_block_openers_in_several_languages(line: str) -> None:
    assert opens_block(line)


@pytest.mark.parametrize(
    "line",
    ["x = compute(a)", "return total", "local x = f(a)", "fmt.Println(x)", "    pass", "do_it()"],
)
def test_lines_that_open_nothing(line: str) -> None:
    assert not opens_block(line)


def test_block_closers_are_whole_words() -> None:
    assert closes_block("    }") and closes_block("end") and closes_block("  ) -> None:")
    assert closes_block("done") and closes_block("end)")
    assert not closes_block("endpoint = 1") and not closes_block("x = }")


def test_indentation_style_of_a_file() -> None:
    go = ["func f() {", "\tx := 1", "\tif x {", "\t\treturn", "\t}", "}"]
    assert indent_style(go) == "tabs"
    py = ["def f():", "    x = 1", "    if x:", "        return"]
    assert indent_style(py) == "spaces"
    c_tabs = ["/*", " * comment", " */", "int f() {", "\treturn 1;", "\tg();", "}"]
    assert indent_style(c_tabs) == "tabs"  # the ` * ` of a comment is alignment, not style
    assert indent_style(["x = 1", "    y"]) is None  # too little to say
    assert indent_style(["\ta", "    b", "\tc", "    d"]) is None  # a mix: no opinion
