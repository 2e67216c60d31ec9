"""engine/service/suggestions.py: typed-through reuse of suggestions, finished or streaming."""

from __future__ import annotations

from ghostfim.engine.service.suggestions import (
    MAX_TYPED_THROUGH,
    PREFIX_KEY_CHARS,
    Suggestion,
    SuggestionCache,
    context_key,
)


def remaining(hit: object) -> str:
    """What is left to show of a hit's suggestion after what was typed."""
    suggestion, typed = hit.suggestion, hit.typed  # type: ignore[attr-defined]
    return suggestion.text[len(typed) :] if suggestion.text.startswith(typed) else ""


def test_typed_characters_that_match_a_suggestion_reuse_it() -> None:
    cache = SuggestionCache()
    s = Suggestion(text="return a + b", done=True)
    cache.put("def add(a, b):\n    ", "\n", s)
    hit = cache.lookup("def add(a, b):\n    ret", "\n")
    assert hit is not None and hit.suggestion is s and hit.typed == "ret"
    assert remaining(hit) == "urn a + b"
    assert cache.lookup("def add(a, b):\n    rex", "\n") is None
    assert cache.lookup("def add(a, b):\n    return a + b", "\n") is None  # nothing left
    assert cache.lookup("def add(a, b):\n    ret", "\nother") is None  # another suffix


def test_a_streaming_suggestion_can_be_typed_ahead_of() -> None:
    cache = SuggestionCache()
    s = Suggestion(text="ret")
    cache.put("x:\n", "", s)
    hit = cache.lookup("x:\nretu", "")
    assert hit is not None and remaining(hit) == ""  # not grown yet, but still may
    s.update("return 1", done=True)
    hit = cache.lookup("x:\nretu", "")
    assert hit is not None and remaining(hit) == "rn 1"


def test_cancelled_suggestion_does_not_grow() -> None:
    s = Suggestion(text="ab")
    s.update("ab", cancelled=True)
    assert s.done and not s.could_continue("abc")


def test_an_empty_suggestion_in_its_prefill_says_nothing_about_the_next_character() -> None:
    assert not Suggestion(text="").could_continue("x")
    assert Suggestion(text="ab").could_continue("a")
    assert not Suggestion(text="ab", done=True).could_continue("ab")


def test_listeners_hear_every_update() -> None:
    seen: list[tuple[str, bool]] = []
    s = Suggestion()
    s.listeners.append(lambda x: seen.append((x.text, x.done)))
    s.update("a")
    s.update("ab", done=True)
    assert seen == [("a", False), ("ab", True)]


def test_typed_through_is_bounded_and_keys_are_windows() -> None:
    cache = SuggestionCache()
    long = "x" * (MAX_TYPED_THROUGH + 50)
    cache.put("a = ", "", Suggestion(text=long, done=True))
    assert cache.lookup("a = " + long[:MAX_TYPED_THROUGH], "") is not None
    assert cache.lookup("a = " + long[: MAX_TYPED_THROUGH + 1], "") is None
    tail = "t" * PREFIX_KEY_CHARS  # only the text near the cursor identifies a state
    assert context_key("z" * 1000 + tail, "") == context_key("y" * 1000 + tail, "")
    assert context_key("a", "b") != context_key("a", "c")
    assert len(cache) == 1
    cache.clear()
    assert len(cache) == 0
