"""engine/context/guide.py: which names may follow a dot, from a member lookup."""

from __future__ import annotations

from ghostfim.engine.context.guide import MemberGuide, Next, enclosing_class, local_classes

NAMES = {
    "Pool()": frozenset({"tasks", "add", "close"}),
    "Pool": frozenset({"LIMIT", "create"}),
    "proto_utils.Pool()": frozenset({"tasks"}),
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
    ]  # each once; not `res`, a parameter whose class is not shown


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


def test_cls_in_a_class_method_goes_on_with_the_class_names() -> None:
    g, lookup = guide("class Pool:\n    @classmethod\n    def make(cls):\n        return cls.")
    assert g.after("") == Next(("LIMIT", "create"))
    assert lookup.asked == ["Pool"]
    for before in (
        "class Pool:\n    def make(self):\n        return cls.",  # not a class method
        "class Pool:\n    @classmethod\n    def make(cls):\n        cls.",  # it may assign
    ):
        g, _ = guide(before)
        assert g.after("") is None, before


def test_a_local_goes_on_with_the_instance_names_of_the_class_its_function_shows() -> None:
    for before, asked in (
        ("def f(pool: Pool):\n    pool.", "Pool()"),
        ("def f(\n    pool: 'Pool | None' = None,\n) -> dict[str, int]:\n    pool.", "Pool()"),
        ("def f(pool: Optional[proto_utils.Pool]):\n    return pool.", "proto_utils.Pool()"),
        ("async def f():\n    pool = await Pool(\n        1,\n    )\n    x = pool.", "Pool()"),
        ("def f(pool: Pool):\n    if pool is None:\n        pool = Pool()\n    pool.", "Pool()"),
        ("def f():\n    pool: Pool = make()\n    pool.", "Pool()"),
    ):
        g, lookup = guide(before)
        assert g.after("") is not None, before
        assert lookup.asked == [asked], before
    # The name alone: a dot after it goes on into its instance's names.
    g, _ = guide("def f(pool: Pool):\n    x = pool")
    assert g.after("") == Next((), ends=True, after_dot=("add", "close", "tasks"), open=True)


def test_a_local_whose_class_is_not_shown_is_not_guided() -> None:
    for before in (
        "def f(pool):\n    pool.",  # no annotation
        "def f(pool: Pool):\n    pool = other()\n    pool.",  # another value
        "def f(pool: Pool):\n    for pool in pools:\n        pool.",
        "def f(pool: Pool):\n    with open(p) as pool:\n        pool.",
        "def f(pool: Pool):\n    pool, n = split()\n    pool.",
        "def f():\n    pool = Pool().started()\n    pool.",  # not the constructor's value
        "def f(*pool: Pool):\n    pool.",  # a tuple of them
        "def f(pool: Pool):\n    pool.tasks.",  # what an attribute holds is not known
        "def f(pool: list[Pool]):\n    pool.",  # a list: asks for list(), which is unknown
    ):
        g, lookup = guide(before)
        assert g.after("") is None, before
        assert "Pool()" not in lookup.asked, before
    # A keyword argument, an attribute, an item or a comprehension's own name binds nothing.
    assert local_classes(
        "def f(pool: Pool):\n"
        "    run(pool=1)\n"
        "    pool.size = 2\n"
        "    pool[0] = 3\n"
        "    xs = [pool for pool in pools]\n"
        "    y"
    ) == {"pool": "Pool", "xs": ""}
    assert local_classes("x = 1\ny") == {}  # module level: not a function's


def test_a_module_name_is_looked_up_as_one_unless_a_local_shadows_it() -> None:
    g, lookup = guide("def f():\n    return proto_utils.")
    assert g.after("") is not None and lookup.asked == ["proto_utils"]
    g, lookup = guide("def f():\n    proto_utils = load()\n    return proto_utils.")
    assert g.after("") is None and lookup.asked == ["load()"]  # a class? the index says not
