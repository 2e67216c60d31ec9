"""The acceptance log: accepted, partial, refused, and what is neither."""

from __future__ import annotations

from typing import Any

from ghostfim.engine.service.acceptance import AcceptanceLog, Outcome
from ghostfim.engine.text.place import Place
from ghostfim.engine.tuning import READ_MS
from ghostfim.lsp.wire import acceptance_json

PLACE = Place("python", "end", "word")
READ_S = READ_MS / 1000


def log_with_outcomes(reports_accepts: bool = True) -> tuple[AcceptanceLog, list[Outcome]]:
    """A log and what it hands on; its client reports accepts unless told otherwise."""
    outcomes: list[Outcome] = []
    log = AcceptanceLog(listeners=[outcomes.append], reports_accepts=reports_accepts)
    return log, outcomes


def summary(log: AcceptanceLog) -> dict[str, Any]:
    """The counts as ghostfim/status reports them."""
    return acceptance_json(log.counts)


def show(log: AcceptanceLog, text: str, now: float, origin: object, doc: str = "a") -> str:
    return log.show(doc, text, PLACE, now=now, ttgt_ms=50.0, explicit=False, origin=origin)


def test_a_full_accept_counts_the_characters_shown() -> None:
    log, outcomes = log_with_outcomes()
    item = show(log, "sqrt(x)", 0.0, origin=object())
    assert log.accepted(item)
    assert summary(log)["accepted"] == 1 and summary(log)["acceptedChars"] == 7
    assert [o.kind for o in outcomes] == ["accepted"] and outcomes[0].chars == 7
    assert not log.accepted("unknown")


def test_read_then_typed_over_is_refused_but_unread_is_not() -> None:
    log, outcomes = log_with_outcomes()
    show(log, "foo()", 0.0, origin=object())
    log.left("a", now=READ_S / 2)  # gone before anyone could read it
    show(log, "bar()", 1.0, origin=object())
    log.left("a", now=1.0 + READ_S)
    assert summary(log)["refused"] == 1
    assert [o.kind for o in outcomes] == ["refused"]


def test_refusals_wait_for_the_clients_first_accept_signal() -> None:
    """A client that never reports accepts cannot tell a refusal from an accept it did not
    report: its refusals are counted but not handed on until an accept signal comes."""
    log, outcomes = log_with_outcomes(reports_accepts=False)
    for i in range(3):
        show(log, f"foo{i}()", float(i), origin=object())
        log.left("a", now=i + READ_S)
    assert summary(log)["refused"] == 3 and outcomes == []  # counted, not learned from
    assert not log.accepted("g999")  # an unknown item: still a signal that accepts come
    assert [o.kind for o in outcomes] == ["refused"] * 3  # handed on, in order
    show(log, "bar()", 10.0, origin=object())
    log.left("a", now=10.0 + READ_S)
    assert [o.kind for o in outcomes] == ["refused"] * 4  # from now on, at once


def test_a_partial_accept_is_a_signal_too() -> None:
    log, outcomes = log_with_outcomes(reports_accepts=False)
    show(log, "foo()", 0.0, origin=object())
    log.left("a", now=READ_S)
    taken = show(log, "bar(x)", 1.0, origin=object())
    assert log.partially_accepted(taken, 3)
    assert [o.kind for o in outcomes] == ["refused", "partial"]


def test_a_different_suggestion_replacing_a_read_one_refuses_it() -> None:
    log, _ = log_with_outcomes()
    show(log, "foo()", 0.0, origin=object())
    show(log, "bar()", 1.0, origin=object())
    assert summary(log)["refused"] == 1


def test_typing_through_continues_the_item_and_an_old_accept_counts_what_is_left() -> None:
    log, _ = log_with_outcomes()
    suggestion = object()
    first = show(log, "sqrt(x)", 0.0, origin=suggestion)
    show(log, "qrt(x)", 1.0, origin=suggestion)  # the user typed "s": same suggestion
    assert summary(log)["refused"] == 0
    assert log.accepted(first)  # the editor still held the first item
    assert summary(log)["acceptedChars"] == 6


def test_partial_then_whole_is_one_accept() -> None:
    log, outcomes = log_with_outcomes()
    item = show(log, "alpha beta", 0.0, origin=object())
    assert log.partially_accepted(item, 6)
    assert summary(log)["partial"] == 1 and summary(log)["acceptedChars"] == 6
    log.accepted(item)
    s = summary(log)
    assert (s["accepted"], s["partial"], s["acceptedChars"]) == (1, 0, 10)
    assert [o.chars for o in outcomes] == [6, 4]
    assert s["acceptRate"] == 1.0


def test_accept_rate_is_of_items_read() -> None:
    log, _ = log_with_outcomes()
    taken = show(log, "x", 0.0, origin=object(), doc="a")
    log.accepted(taken)
    show(log, "y", 0.0, origin=object(), doc="b")
    log.left("b", now=1.0)
    show(log, "z", 2.0, origin=object(), doc="c")
    log.left("c", now=2.01)  # not read
    assert summary(log)["acceptRate"] == 0.5


def test_grown_and_replaced_text_is_what_an_accept_takes() -> None:
    log, _ = log_with_outcomes()
    first, refreshed = object(), object()
    item = show(log, "sq", 0.0, origin=first)
    log.grown("a", first, "sqrt(x)")
    log.now_shows("a", first, refreshed, "sqrt(values)")
    log.accepted(item)
    assert summary(log)["acceptedChars"] == len("sqrt(values)")


def test_typing_through_keeps_the_reading_clock() -> None:
    """Read, typed one matching character, then typed over: a refusal, although the item
    that continues it has been on screen for less than READ_MS."""
    log, _ = log_with_outcomes()
    suggestion = object()
    show(log, "foo(x)", 0.0, origin=suggestion)
    show(log, "oo(x)", READ_S, origin=suggestion)  # the user typed "f"
    log.left("a", now=READ_S + 0.05)
    assert log.counts.refused == 1


def test_an_accept_counts_what_the_editor_inserted() -> None:
    log, _ = log_with_outcomes()
    suggestion = object()
    item = show(log, "sqrt(", 0.0, origin=suggestion)
    log.inserted("a", 5)  # the editor took what it showed ...
    log.grown("a", suggestion, "sqrt(values)")  # ... while the suggestion streamed on
    log.accepted(item)
    assert log.counts.accepted_chars == 5
