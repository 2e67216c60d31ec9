"""Stop rules (multi-line policy, block scope) and the post-processing rules, one by one.

Every case is real code with the cursor marked `█`: `at(source)` cuts it into the cursor
context the rules read (prefix, suffix, rest of the line, lines above and below).
"""

from __future__ import annotations

import pytest

from ghostfim.engine.text.cursor import CursorContext, closes_block, indent_style, opens_block
from ghostfim.engine.text.postprocess import (
    RULES,
    clean_suggestion,
    cut_at_indent_style_clash,
    cut_before_closer_the_line_has,
    cut_lines_repeating_suffix,
    cut_repeated_line,
    drop_if_rest_of_line_has_it,
    drop_indent_already_typed,
    drop_overlap_with_rest_of_line,
    drop_repeat_of_lines_above,
    empty_if_blank,
    strip_trailing_whitespace,
    too_much_after_cursor,
    well_formed,
)
from ghostfim.engine.text.stops import MAX_BLOCK_LINES, StopPolicy, wants_multiline

CURSOR = "█"


def split(source: str) -> tuple[str, str]:
    assert source.count(CURSOR) == 1
    prefix, suffix = source.split(CURSOR)
    return prefix, suffix


def at(source: str) -> CursorContext:
    return CursorContext.around(*split(source))


def policy(source: str, mode: str = "auto") -> StopPolicy:
    return StopPolicy.for_context(mode, at(source))  # type: ignore[arg-type]


def stopped(source: str, generated: str, mode: str = "auto") -> tuple[str, str]:
    """What the stop rules keep of `generated` (fed as it grows, as decoding does), and why."""
    p = policy(source, mode)
    for end in range(1, len(generated) + 1):
        d = p.check(generated[:end])
        if d.stop:
            return generated[:end][: d.keep] if d.keep >= 0 else generated[:end], d.reason
    return generated, ""


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


# --- rules: whitespace -------------------------------------------------------------------------
def test_strip_trailing_whitespace() -> None:
    ctx = at("def f():\n    █\n")
    assert strip_trailing_whitespace("x = 1   \n   \n", ctx) == "x = 1"
    assert strip_trailing_whitespace("a = 1  \n    b = 2\t\n", ctx) == "a = 1\n    b = 2"
    # A space between the suggestion and code after the cursor is kept.
    assert strip_trailing_whitespace("return ", at("    █x\n")) == "return "
    assert strip_trailing_whitespace("return ", at("    █ x\n")) == "return"


def test_empty_and_whitespace_only_suggestions_are_dropped() -> None:
    ctx = at("x = █\n")
    assert empty_if_blank("   \n  ") == ""
    assert clean_suggestion("   \n  ", ctx) == ""
    assert clean_suggestion("", ctx) == ""
    assert clean_suggestion("\n\n", ctx, enabled=False) == ""


# --- rules: indentation ------------------------------------------------------------------------
def test_indentation_already_typed_is_not_typed_again() -> None:
    # Python: the editor indented the line after `def`; the model indented again.
    assert drop_indent_already_typed("    return x", at("def f(x):\n    █\n")) == "return x"
    # C, tabs: the same.
    assert drop_indent_already_typed("\treturn 1;", at("int f(void) {\n\t█\n}\n")) == "return 1;"
    # A block: only the first line moves; the next lines are absolute.
    ctx = at("def f(x):\n    █\n")
    assert drop_indent_already_typed("    a = x\n    return a", ctx) == "a = x\n    return a"


def test_indentation_the_model_adds_to_the_typed_indentation_is_kept() -> None:
    # Cursor at column 0 of an empty line: the model writes the indentation.
    assert drop_indent_already_typed("    return x", at("def f(x):\n█\n")) == "    return x"
    # Cursor in the middle of the indentation: the model writes the rest of it.
    assert drop_indent_already_typed("  return x", at("def f(x):\n  █  \n")) == "  return x"
    # One level deeper after an opener: `if x:` at 4, cursor at 4, the body at 8.
    source = "def f(x):\n    if x:\n    █\n"
    assert drop_indent_already_typed("    return 1", at(source)) == "    return 1"
    # Lua: `then` at 2, the editor indented to 2; the model goes to 4.
    assert drop_indent_already_typed("  ok()", at("  if x then\n  █\n")) == "  ok()"
    # Code before the cursor: nothing to do.
    assert drop_indent_already_typed(" 1", at("x =█\n")) == " 1"


def test_indentation_style_clash_cuts_or_drops() -> None:
    go = "func f() {\n\tx := 1\n\tif x > 0 {\n\t\tg()\n\t}\n\t█\n}\n"
    # A block whose second line is indented with spaces in a tab file: cut before it.
    assert cut_at_indent_style_clash("y := 2\n    z := 3", at(go)) == "y := 2"
    # The first line itself in the other style (cursor at column 0): nothing to show.
    go_col0 = go.replace("\t█", "█")
    assert cut_at_indent_style_clash("    y := 2", at(go_col0)) == ""
    # The same style: untouched.
    assert cut_at_indent_style_clash("y := 2\n\tz := 3", at(go)) == "y := 2\n\tz := 3"
    # Python (spaces): a tab-indented line is cut.
    py = "def f(x):\n    a = 1\n    b = 2\n    █\n"
    assert cut_at_indent_style_clash("c = 3\n\td = 4", at(py)) == "c = 3"
    # A file without a clear style is left alone.
    assert cut_at_indent_style_clash("a\n\tb", at("x = 1\n█\n")) == "a\n\tb"


# --- rules: brackets and quotes against the rest of the line ------------------------------------
@pytest.mark.parametrize(
    "source, suggestion, expected",
    [
        # The editor auto-inserted the closer: do not double it.
        ("x = foo(█)\n", "a, b)", "a, b"),  # Python
        ('print("█")\n', 'hello")', "hello"),  # a string and its call
        ('print("█")\n', 'hello"', "hello"),
        ("const v = [█];\n", "1, 2, 3]", "1, 2, 3"),  # JS
        ("if (█) {\n", "x > 0) {", "x > 0"),  # C: the model wrote past the closer
        ("x = foo(bar(█))\n", "x))", "x"),
        ("x = foo(bar(█)\n", "x))", "x)"),  # only one closer after the cursor: keep one
        ("x = [foo(█]\n", "a)]", "a)"),  # its `)` is needed, its `]` is there
        ("const s = '█';\n", "hello';", "hello"),  # JS
        ('s = "█"\n', "don't\"", "don't"),  # an apostrophe is not a quote
        ("fmt.Println(█)\n", 'x, "y")', 'x, "y"'),  # Go
        ("print(█)\n", "string.format('%d', n))", "string.format('%d', n)"),  # Lua
        # The suggestion's own brackets need the closer: nothing is cut.
        ("x = bar(█)\n", "foo(a, b)", "foo(a, b)"),
        ("f(█)\n", "a), g(b", "a), g(b"),  # the line balances either way: the longest
        ("x = foo(█)\n", "a, b", "a, b"),
        ("x = foo(█\n", "a, b)", "a, b)"),  # nothing after the cursor: the `)` is needed
        # A call spanning lines: its own `)` is on the line below, the model's is one too many.
        ("ok = write(\n    handle,\n    byref(█),\n)\n", "written),", "written"),
        ("ok = write(\n    handle,\n    byref(█),\n)\n", "written", "written"),
        # The last argument's line closes the call opened above: `g`'s `)` is needed...
        ("f(\n    a,\n    g(█);\nx = 1\n", "b)", "b)"),
        # ... unless the editor inserted it too.
        ("f(\n    a,\n    g(█));\nx = 1\n", "b)", "b"),
    ],
)
def test_no_doubled_closing_bracket_or_quote(source: str, suggestion: str, expected: str) -> None:
    assert cut_before_closer_the_line_has(suggestion, at(source)) == expected


@pytest.mark.parametrize(
    "source, suggestion, expected",
    [
        ("    return x█;\n", " + 1;", " + 1"),  # C/JS: the whole rest repeated
        ("foo(a█);\n", ", b);", ", b"),  # a punctuation run that begins the rest
        ("if x█:\n", " > 0:", " > 0"),  # Python
        ("x = bar(█)\n", "foo(a, b)", "foo(a, b)"),  # its `)` is its own
        ("x = █y\n", "x + y", "x + "),  # the whole rest, a word: still a repeat
        ("█x = 1\n", "x", "x"),  # a partial word is a coincidence
        ("total = █\n", "0", "0"),
        ("if x █= 1:\n", "=", "="),  # the first half of `==`
        ("a[1:█:2]\n", ":", ":"),  # `a[1::2]`
        ("x = a |█| b\n", "|", "|"),
        ("    if (█) {\n        go();\n    }\n", "!done(x)", "!done(x)"),  # its own `)`
        ('    s = f"{█}"\n', "x", "x"),
        ("    s = f\"{', '.join(█)}\"\n", "names()", "names()"),  # brackets in a string
    ],
)
def test_overlap_with_the_rest_of_the_line(source: str, suggestion: str, expected: str) -> None:
    assert drop_overlap_with_rest_of_line(suggestion, at(source)) == expected


def test_overlap_with_the_rest_of_the_line_given_as_text() -> None:
    # The older signature (the rest of the line alone) still works.
    assert drop_overlap_with_rest_of_line("a, b)", ")") == "a, b"
    assert drop_overlap_with_rest_of_line("x", "x = 1") == "x"


def test_a_suggestion_the_rest_of_the_line_already_has_is_dropped() -> None:
    assert drop_if_rest_of_line_has_it("x", at("foo(█x)\n")) == ""
    assert drop_if_rest_of_line_has_it("items", at("for x in █items:\n")) == ""
    assert drop_if_rest_of_line_has_it("a, b", at("foo(█a, b);\n")) == ""  # the whole rest
    assert drop_if_rest_of_line_has_it("len(x)", at("n = █x\n")) == "len(x)"
    # Not a whole token: the second `s` of `assert`, the first `=` of `==`.
    assert drop_if_rest_of_line_has_it("s", at("as█sert x\n")) == "s"
    assert drop_if_rest_of_line_has_it("=", at("if (x =█= 1) {\n")) == "="  # `===`


# --- rules: the lines around -------------------------------------------------------------------
def test_last_lines_repeating_the_code_below_are_cut() -> None:
    py = "def f(xs):\n    total = 0\n    █\n    return total\n"
    # The loop, then the next line of code again: cut it.
    text = "for x in xs:\n        total += x\n    return total"
    assert cut_lines_repeating_suffix(text, at(py)) == "for x in xs:\n        total += x"
    # Only the start of that line (generation ran out of tokens in it): cut too.
    text = "for x in xs:\n        total += x\n    return to"
    assert cut_lines_repeating_suffix(text, at(py)) == "for x in xs:\n        total += x"
    # JS: two lines below repeated.
    js = "function f(a) {\n  █\n  log(a);\n  return a;\n}\n"
    text = "a = a + 1;\n  log(a);\n  return a;"
    assert cut_lines_repeating_suffix(text, at(js)) == "a = a + 1;"
    # Lua: the whole suggestion is the code below: nothing to show.
    lua = "if ok then\n  █\n  run()\nend\n"
    assert cut_lines_repeating_suffix("run()\nend", at(lua)) == ""


def test_code_below_at_another_indentation_or_a_lone_partial_line_is_kept() -> None:
    c = "int f(int x) {\n    if (x) {\n        █\n}\n"
    # `}` of the `if` is not the `}` of the function below.
    assert cut_lines_repeating_suffix("g();\n    }", at(c)) == "g();\n    }"
    # A one-line suggestion that only starts like the next line is not evidence enough.
    py = "def f(x):\n    █\n    print(x)\n"
    assert cut_lines_repeating_suffix("print", at(py)) == "print"


def test_a_line_repeating_the_line_before_it_is_cut() -> None:
    ctx = at("def f():\n    █\n")
    assert cut_repeated_line("x += 1\n    x += 1\n    x += 1", ctx) == "x += 1"
    go = "func f() {\n\tx := 1█\n}\n"
    assert cut_repeated_line("\n\tx := 1", at(go)) == ""  # the cursor line again
    assert cut_repeated_line("a()\n    b()", ctx) == "a()\n    b()"


def test_a_suggestion_repeating_the_lines_above_is_dropped() -> None:
    py = "def f(xs):\n    ys = []\n    ys.append(xs[0])\n    █\n"
    assert drop_repeat_of_lines_above("ys.append(xs[0])", at(py)) == ""
    assert drop_repeat_of_lines_above("ys.append(xs[1])", at(py)) == "ys.append(xs[1])"
    # The two lines above, again.
    assert drop_repeat_of_lines_above("ys = []\n    ys.append(xs[0])", at(py)) == ""
    # C: the same statement typed again after its first words.
    c = "int f(void) {\n    count++;\n    █\n}\n"
    assert drop_repeat_of_lines_above("count++;", at(c)) == ""
    # At the end of a line, the next line repeating it.
    lua = "local t = {}\ntable.insert(t, 1)█\n"
    assert drop_repeat_of_lines_above("\ntable.insert(t, 1)", at(lua)) == ""
    # `}` closing the outer block is not the `}` above it.
    js = "function f() {\n  if (x) {\n    g();\n  }\n█\n"
    assert drop_repeat_of_lines_above("}", at(js)) == "}"


# --- all together, and switched off ------------------------------------------------------------
def test_clean_suggestion_applies_every_rule() -> None:
    assert clean_suggestion("x = 1   \n   \n", at("█\n")) == "x = 1"
    assert clean_suggestion("a, b)", at("x = foo(█)\n")) == "a, b"
    assert clean_suggestion("    return x  ", at("def f(x):\n    █\n")) == "return x"
    # The older signature: the rest of the line alone.
    assert clean_suggestion("a, b)", ")") == "a, b"


def test_postprocess_off_keeps_only_a_well_formed_suggestion() -> None:
    ctx = at("x = foo(█)\n")
    assert clean_suggestion("a, b)  \n\n", ctx, enabled=False) == "a, b)"
    assert clean_suggestion("  ", ctx, enabled=False) == ""
    assert well_formed("return ", at("    █x\n")) == "return "


def test_rules_never_add_text() -> None:
    """Every rule only removes: what survives is the model's text (bar indentation the
    editor already shows), whatever the case."""
    cases = [
        ("def f(x):\n    █\n    return x\n", "    y = x\n    return x\n"),
        ("x = foo(█)\n", "a, (b)) + c"),
        ('print("█")\n', "it's\")"),
        ("func f() {\n\tx := 1\n\t█\n}\n", "x := 1\n    y"),
        ("if ok then█\nend\n", "\n  run()\nend"),
    ]
    for source, text in cases:
        ctx = at(source)
        for rule in RULES:
            out = rule(text, ctx)
            assert out.strip() in text, (rule.__name__, text, out)


# --- no automatic suggestion with code after the cursor (maxRestOfLine) ------------------------
def test_rest_of_line_limit_follows_llama_vim() -> None:
    assert not too_much_after_cursor(")", 8)
    assert not too_much_after_cursor("12345678", 8)
    assert too_much_after_cursor("123456789", 8)
    assert too_much_after_cursor("    return x", 8)  # the cursor in the indentation
    assert not too_much_after_cursor("x)      ", 8)  # trailing whitespace is invisible
    assert not too_much_after_cursor("        ", 8)  # a line of whitespace is empty
    assert too_much_after_cursor(")", 0) and not too_much_after_cursor("", 0)


# --- the `postprocess` setting, from the client to the request ---------------------------------
def test_postprocess_setting_reaches_the_request() -> None:
    from ghostfim.engine.config import EngineConfig
    from ghostfim.engine.service.completion import CompletionService, CursorState
    from ghostfim.lsp.settings import parse_settings, settings_to_client

    settings, problems = parse_settings({"postprocess": False, "maxRestOfLine": 20})
    assert problems == [] and settings.postprocess is False
    assert settings_to_client(settings)["postprocess"] is False
    assert settings.max_rest_of_line == 20
    assert parse_settings({"postprocess": "no"})[0].postprocess is True  # bad: the default
    assert parse_settings({"postprocess": "no"}, settings)[0].postprocess is False  # kept
    assert EngineConfig().postprocess is True

    class NoEvents:
        def __getattr__(self, name: str) -> object:
            return lambda *args, **kwargs: None

    service = CompletionService(NoEvents(), settings)  # type: ignore[arg-type]
    state = CursorState("file:///a.py", 1, None, "x = ", "\n", 0, 4, 5)
    assert service._request_for(state, "full").postprocess is False


# --- a correct suggestion survives everything --------------------------------------------------
SAMPLES = {
    "python": '''import os


def walk(root, pattern=None):
    """Yield the files under root, sorted."""
    found = []
    for path, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if pattern and not name.endswith(pattern):
                continue
            found.append(os.path.join(path, name))
    return found


class Counter:
    def __init__(self, start=0):
        self.value = start

    def add(self, n):
        self.value += n
        return self.value
''',
    "js": """export function groupBy(items, key) {
  const groups = new Map();
  for (const item of items) {
    const k = typeof key === "function" ? key(item) : item[key];
    if (!groups.has(k)) {
      groups.set(k, []);
    }
    groups.get(k).push(item);
  }
  return groups;
}

const total = (xs) => xs.reduce((a, b) => a + b, 0);
console.log(total([1, 2, 3]), groupBy(["a", "bb"], (s) => s.length));
""",
    "c": """#include <stdio.h>

static int sum(const int *xs, int n) {
\tint total = 0;
\tfor (int i = 0; i < n; i++) {
\t\ttotal += xs[i];
\t}
\treturn total;
}

int main(void) {
\tint xs[] = {1, 2, 3};
\tprintf("%d\\n", sum(xs, (int)(sizeof(xs) / sizeof(xs[0]))));
\treturn 0;
}
""",
    "go": """package main

import "fmt"

func fib(n int) int {
\tif n < 2 {
\t\treturn n
\t}
\treturn fib(n-1) + fib(n-2)
}

func main() {
\tfor i := 0; i < 10; i++ {
\t\tfmt.Println(i, fib(i))
\t}
}
""",
    "lua": """local M = {}

function M.map(t, f)
  local out = {}
  for i, v in ipairs(t) do
    out[i] = f(v)
  end
  return out
end

function M.sum(t)
  local s = 0
  for _, v in ipairs(t) do
    if v ~= nil then
      s = s + v
    end
  end
  return s
end

return M
""",
}


def infill_tasks(source: str) -> list[tuple[str, str, str]]:
    """(prefix, middle, suffix): each line's code after its indentation, each call's arguments
    with the editor's `)` after the cursor, and each block's body after its opener."""
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    tasks = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        tasks.append((source[: starts[i] + ind], line[ind:], source[starts[i] + len(line) :]))
        p, q = line.find("("), line.rfind(")")
        if 0 <= p < q - 1:
            tasks.append((source[: starts[i] + p + 1], line[p + 1 : q], source[starts[i] + q :]))
        if opens_block(line) and i + 1 < len(lines) and lines[i + 1].strip():
            body = []
            for nxt in lines[i + 1 :]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= ind:
                    break
                body.append(nxt)
            while body and not body[-1].strip():
                body.pop()
            if body:
                bi = len(body[0]) - len(body[0].lstrip())
                end = starts[i + 1] + len("\n".join(body))
                middle = "\n".join(body)[bi:]
                tasks.append((source[: starts[i + 1] + bi], middle, source[end:]))
    return tasks


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_a_correct_suggestion_is_never_changed(language: str) -> None:
    tasks = infill_tasks(SAMPLES[language])
    assert len(tasks) > 15
    for prefix, middle, suffix in tasks:
        ctx = CursorContext.around(prefix, suffix)
        assert clean_suggestion(middle, ctx) == middle, (prefix[-40:], middle, suffix[:20])


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
