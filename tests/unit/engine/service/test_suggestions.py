"""engine/service/suggestions.py: typed-through reuse of suggestions, finished or streaming."""

from __future__ import annotations

from ghostfim.engine.service.keystroke import grow
from ghostfim.engine.service.suggestions import (
    MAX_TYPED_THROUGH,
    PREFIX_KEY_CHARS,
    Suggestion,
    SuggestionCache,
    context_key,
)
from ghostfim.engine.text.confidence import Confidence


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


# --- what is shown of a suggestion, from where the user stands ---------------------------------
RULE = Confidence(refusal_cost=4.0, sharpness=0.35)
TOKENS = [("for", 0.99), (" f", 0.95), (" in", 0.99), (" fields", 0.9), (" if", 0.001)]
TOKENS += [(" f", 0.95), (".compare", 0.9), ("]", 0.95)]


def suggestion_of(tokens: list[tuple[str, float]], rule: Confidence | None = RULE) -> Suggestion:
    text, marks = "", []
    for piece, prob in tokens:
        text += piece
        marks.append((len(text), prob))
    return Suggestion(text=text, done=True, marks=tuple(marks), rule=rule)


def test_what_is_shown_ends_before_the_first_unsure_token() -> None:
    s = suggestion_of(TOKENS)
    assert s.text == "for f in fields if f.compare]"
    assert s.shown() == "for f in fields"
    assert s.shown("for f") == " in fields"  # judged again from where the user stands


def test_typing_past_the_unsure_token_shows_the_sure_text_after_it() -> None:
    s = suggestion_of(TOKENS)
    assert s.shown("for f in fields") == ""  # the unsure word itself: not worth reading
    assert s.shown("for f in fields if") == " f.compare]"
    assert s.shown("for f in fie") == "lds"  # inside a token on screen: the rest of it stays
    # Inside the unsure token: nothing, and the cache leaves that state to the model, which
    # asked there (the typed "i" healed into its prompt) may write something else.
    assert s.shown("for f in fields i") == "" and s.hides_from("for f in fields i")
    assert not s.hides_from("for f in fields")  # on a boundary: the model's own next token


def test_without_a_rule_or_the_models_probabilities_all_of_it_is_shown() -> None:
    assert suggestion_of(TOKENS, rule=None).shown() == "for f in fields if f.compare]"
    remote = Suggestion(text="for f in fields if f.compare]  ", rule=RULE)  # no marks
    assert remote.shown("for ") == "f in fields if f.compare]"


def test_a_suggestion_never_worth_showing_shows_nothing_from_its_start() -> None:
    s = suggestion_of([("x", 0.1), (")", 0.1), (" + y", 0.99)])
    assert s.shown() == ""
    assert s.shown("x)") == " + y"  # once the unsure part is typed, the sure rest shows


def test_a_streaming_suggestion_shows_what_is_worth_showing_so_far() -> None:
    s = Suggestion(rule=RULE)
    s.update("for", ((3, 0.99),))
    assert s.shown() == "for"
    s.update("for f in fields if", ((3, 0.99), (5, 0.95), (8, 0.99), (15, 0.9), (18, 0.05)))
    assert s.shown() == "for f in fields"  # and it stays so as the rest streams


# --- memory (engine/memory.py) -------------------------------------------------------------------
def long_suggestion(i: int, tokens: int = 64) -> Suggestion:
    text = "".join(f"tok{i}_{t} " for t in range(tokens))
    marks = tuple((len(text) * (t + 1) // tokens, 0.5 + t / 1000) for t in range(tokens))
    return Suggestion(text=text, marks=marks, done=True)


def test_the_cache_is_bounded_by_the_bytes_of_its_suggestions() -> None:
    cache = SuggestionCache(limit=200_000)
    for i in range(2_000):
        cache.put(f"prefix {i}", "", long_suggestion(i))
    usage = cache.usage()
    assert usage.name == "suggestions" and usage.limit == 200_000
    assert 150_000 <= usage.bytes <= 200_000  # full, and no fuller
    assert len(cache) < 2_000 // 10  # 64-token suggestions: each over a kilobyte
    assert cache.lookup("prefix 1999", "") is not None and cache.lookup("prefix 0", "") is None


def test_a_streaming_suggestion_is_measured_again_when_it_ends() -> None:
    cache = SuggestionCache(limit=1_000_000)
    streaming = Suggestion()
    cache.put("def f():\n    ", "", streaming)
    empty = cache.usage().bytes
    finished = long_suggestion(1, tokens=200)
    grow(streaming, finished.text, finished.marks)  # still growing: measured at its end
    assert cache.usage().bytes == empty
    grow(streaming, finished.text, finished.marks, done=True)
    assert cache.usage().bytes > empty + len(finished.text) + 200 * 100
    assert streaming.listeners == []  # the cache no longer listens to a finished suggestion
