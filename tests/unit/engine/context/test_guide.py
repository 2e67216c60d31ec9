"""engine/context/guide.py: which names may follow a dot, from a member lookup."""

from __future__ import annotations

from ghostfim.engine.context.guide import MemberGuide, Next, enclosing_class

NAMES = {
    "Pool()": frozenset({"tasks", "add", "close"}),
    "this()": frozenset({"items", "size", "constructor", "__init__"}),
    "proto_utils": frozenset({"ToProto", "FromProto", "LIMIT"}),
    "proto_utils.ToProto": frozenset({"task", "task_push_config", "agent_card"}),
}
TO_PROTO = ("agent_card", "task", "task_push_config")


class Lookup:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, dotted: str) -> frozenset[str] | None:
        self.asked.append(dotted)
        return NAMES.get(dotted)


def guide(before: str) -> tuple[MemberGuide, Lookup]:
    lookup = Lookup()
    return MemberGuide(lookup, before), lookup


def test_after_a_known_dot_the_rests_of_the_names_that_start_with_what_is_written() -> None:
    g, lookup = guide("def f(res):\n    return proto_utils.")
    assert g.after("") == Next(("FromProto", "LIMIT", "ToProto"))
    assert g.after("To") == Next(("Proto",))
    # A whole name may end (not into a longer one the list lacks) or go on into a longer one;
    # a dot after it goes on into its own names.
    assert g.after("ToProto") == Next((), ends=True, after_dot=TO_PROTO)
    assert g.after("ToProto.task") == Next(("_push_config",), ends=True, after_dot=None)
    assert g.after("ToProto.task_push_config") == Next((), ends=True)
    assert g.after("ToProto.agent_card(res") is None  # past the name
    assert lookup.asked == [
        "proto_utils",
        "proto_utils.ToProto",
        "proto_utils.ToProto.task",
        "proto_utils.ToProto.task_push_config",
        "res",
    ]  # each once


def test_a_bare_known_name_guides_only_the_dot_after_it() -> None:
    g, _ = guide("    return proto_utils")
    assert g.after("") == Next(
        (), ends=True, after_dot=("FromProto", "LIMIT", "ToProto"), open=True
    )
    assert g.after("_x") is None  # a name the index does not know


def test_nothing_is_constrained_where_the_names_are_not_known() -> None:
    for before in (
        "x = self.",  # not in a method
        "class Other:\n    def f(self):\n        x = self.",  # a class the index does not know
        "x = proto_utils.Unknown.",
        "x = make().",  # after a call
        "x = items[0].",  # after an index
        "x = a.proto_utils.",  # the chain starts after another dot
        "x = proto_utils..",
        "# see proto_utils.",  # a comment
        "x = 1  # see proto_utils.",  # a comment after code
        '"""Uses\nproto_utils.',  # a docstring
        "x = 'proto_utils.",  # a string
        "x = 1.",
    ):
        g, _ = guide(before)
        assert g.after("") is None, before
    g, _ = guide("return proto_utils.")
    assert g.after("Zed") is None  # the user knows a name the index does not
    assert g.after("ToProto\n") is None  # a new line


def test_only_the_line_the_chain_ends_on_is_read() -> None:
    g, _ = guide("x = 'unclosed\nreturn proto_utils.")
    assert g.after("") == Next(("FromProto", "LIMIT", "ToProto"))
    g, _ = guide('"""A docstring."""\nreturn proto_utils.')  # closed: code again
    assert g.after("") is not None


POOL = "class Pool:\n    def __init__(self):\n        self.tasks = set()\n\n    def stop(self):\n"


def test_self_in_a_method_goes_on_with_its_instance_names() -> None:
    g, lookup = guide(POOL + "        for task in self.")
    assert g.after("") == Next(("add", "close", "tasks"))
    assert g.after("ta") == Next(("sks",))
    assert g.after("tasks") == Next((), ends=True, after_dot=None)  # then any attribute
    assert lookup.asked[0] == "Pool()"
    g, _ = guide(POOL + "        return len(self.")
    assert g.after("") is not None
    # Where `self.` starts the statement it may assign a name no line has yet; and what an
    # attribute holds is not known.
    for typed in ("        self.", "        self.tasks.", "        x = self.tasks."):
        g, _ = guide(POOL + typed)
        assert g.after("") is None, typed


def test_the_class_around_the_cursor_by_the_indentation_above_it() -> None:
    body = "        if ready:\n            x = g(\n                1,\n            )\n"
    assert enclosing_class("class A(B):\n    def f(self, a):\n" + body + "            y") == "A"
    header = "class A:\n    async def f(\n        self,\n        a,\n    ) -> None:\n"
    assert enclosing_class(header + "        y") == "A"
    for before in (
        "class A:\n    @staticmethod\n    def f(a):\n        y",  # no self
        "def f(self):\n    y",  # a function
        "class A:\n    class B:\n        def f(self):\n            y",  # a nested class
        "class A:\n    def f(self):\n        def g():\n            y",  # a closure
        "class A:\n    x = 1\n    y",  # the class body
    ):
        assert enclosing_class(before) is None, before


def test_this_in_javascript_asks_for_the_class_at_the_cursor() -> None:
    g, lookup = guide("class Cache {\n  get(key) {\n    return this.")
    assert g.after("") == Next(("constructor", "items", "size"))  # no dunder offered
    assert g.after("__") == Next(("init__",))  # asked for by the text
    assert lookup.asked == ["this()"]
    for before in ("    this.", "    this.items.", "    x = 1 // see this."):
        g, _ = guide(before)
        assert g.after("") is None, before
