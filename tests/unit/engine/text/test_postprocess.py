"""engine/text/postprocess.py: the clean-up rules one by one, all together, and switched off;
a correct suggestion survives every one of them."""

from __future__ import annotations

import pytest

from ghostfim.engine.text.cursor import CursorContext
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
    well_formed,
)
from tests.support.text_cases import SAMPLES, at, infill_tasks


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
    # The rest of the line alone is context enough for the bracket rule.
    assert clean_suggestion("a, b)", CursorContext(line_before="", rest_of_line=")")) == "a, b"


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


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_a_correct_suggestion_is_never_changed(language: str) -> None:
    tasks = infill_tasks(SAMPLES[language])
    assert len(tasks) > 15
    for prefix, middle, suffix in tasks:
        ctx = CursorContext.around(prefix, suffix)
        assert clean_suggestion(middle, ctx) == middle, (prefix[-40:], middle, suffix[:20])
