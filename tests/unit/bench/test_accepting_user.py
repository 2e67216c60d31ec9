"""The replay's accepting user: what it takes, how it walks the trace, the figures, the loop.

Everything but the last test is fast and needs no model: the loop runs against a fake editor
whose ghost text is always the rest of the line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from bench.accepting_user import (
    REFUSE,
    Decision,
    decide,
    keystrokes_saved,
    signal_counts,
    user_summary,
    what_followed,
    word_pieces,
)
from bench.replay import markdown_table, pass_name, think_rate
from bench.traces import THINK_RATES, Keystroke, Record, Trace, make_trace, new_record
from bench.user_replay import (
    AcceptSignal,
    Pace,
    Screen,
    Walk,
    accept_signals,
    replay_with_user,
)

SOURCE = "\n".join(
    [f"value_{i} = {i}" for i in range(40)]
    + ["def area(width, height):", "    return width * height", ""]
    + [f"tail_{i} = {i}" for i in range(10)]
)


# --- words ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("foo(bar, baz)", ["foo", "(", "bar", ",", " baz", ")"]),
        ("  x = 1", ["  x", " =", " 1"]),
        ("self._data.get(key)", ["self", ".", "_data", ".", "get", "(", "key", ")"]),
        ("a  ", ["a", "  "]),  # trailing spaces are a piece of their own
        ("a\n    b", ["a", "\n", "    b"]),  # a line break is one piece
        ("x == -1)", ["x", " ==", " -", "1", ")"]),
        ("", []),
    ],
)
def test_words_are_what_accept_next_word_takes(text: str, pieces: list[str]) -> None:
    assert word_pieces(text) == pieces
    assert "".join(word_pieces(text)) == text


# --- decisions ------------------------------------------------------------------------------------
def test_tab_takes_a_right_suggestion_whole() -> None:
    decision = decide("tab", "width * height", "width * height")
    assert decision == Decision("full", ("width * height",))
    assert (decision.chars, decision.keys, decision.saved) == (14, 1, 13)
    # A right start of the line is right too: the user accepts it and types on.
    assert decide("tab", "width", "width * height").kind == "full"


def test_tab_takes_the_first_line_of_a_longer_suggestion() -> None:
    decision = decide("tab", "width * height\n    return 0", "width * height")
    assert decision == Decision("line", ("width * height",))
    # The lines below already exist in the traces: the whole is never right.
    assert decide("tab", "width\n", "width").kind == "line"


def test_tab_refuses_anything_not_exactly_right() -> None:
    assert decide("tab", "width * heigth", "width * height") == REFUSE
    assert decide("tab", "width * height + 1", "width * height") == REFUSE
    assert decide("tab", "\nreturn 0", "return 0") == REFUSE  # an empty first line
    assert decide("tab", "", "x") == REFUSE
    assert decide("tab", "x", "") == REFUSE  # nothing left to type on the line


def test_words_takes_the_longest_right_run_of_whole_words() -> None:
    decision = decide("words", "foo(bar, qux)", "foo(bar, baz)")
    assert decision == Decision("words", ("foo", "(", "bar", ","))
    assert (decision.chars, decision.keys, decision.saved) == (8, 4, 4)
    # A word right only in part is not taken, nor anything after it.
    assert decide("words", "fox(bar)", "foo(bar)") == REFUSE
    assert decide("words", "width * heigth", "width * height").pieces == ("width", " *")


def test_words_does_what_tab_does_first() -> None:
    assert decide("words", "a, b", "a, b)") == Decision("full", ("a, b",))
    assert decide("words", "a, b\nc", "a, b)") == Decision("line", ("a, b",))


def test_the_plain_typist_never_accepts() -> None:
    assert decide("none", "width", "width") == REFUSE
    with pytest.raises(ValueError):
        decide("alt", "width", "width")


def test_a_one_character_accept_saves_nothing() -> None:
    assert keystrokes_saved(1, 1) == 0
    assert decide("words", "(x", "(y").saved == 0  # "(" taken with one key
    assert keystrokes_saved(10, 3) == 7


# --- the figures ----------------------------------------------------------------------------------
def test_user_summary_arithmetic() -> None:
    decisions = [
        Decision("full", ("abcdefghij",)),  # 10 characters, 1 key
        Decision("words", ("ab", " cd", "(")),  # 6 characters, 3 keys
        REFUSE,
        REFUSE,
    ]
    s = user_summary(decisions, chars_written=200, cpu_s=12.0)
    assert (s["reads"], s["accepts"], s["refused"]) == (4, 2, 2)
    assert (s["accepts_full"], s["accepts_line"], s["accepts_words"]) == (1, 0, 1)
    assert (s["accepted_chars"], s["accept_keys"]) == (16, 4)
    assert s["accepted_share"] == 0.08  # 16 of 200
    assert s["keystrokes_saved_per_100"] == 6.0  # (16 - 4) / 200 * 100
    assert s["refused_per_100"] == 1.0
    assert s["accept_rate"] == 0.5
    assert s["cpu_s_per_100"] == 6.0


def test_user_summary_with_nothing_read() -> None:
    s = user_summary([], chars_written=50, cpu_s=None)
    assert s["reads"] == 0 and s["accept_rate"] is None
    assert s["accepted_share"] == 0.0 and s["keystrokes_saved_per_100"] == 0.0
    assert s["cpu_s_per_100"] is None


def test_what_followed_a_refusal_is_what_the_server_sees() -> None:
    assert what_followed("width", "height", at_trace_end=False) == "typed_over"
    assert what_followed("hex", "height", at_trace_end=False) == "typed_into"
    assert what_followed("  # note", "", at_trace_end=False) == "end_of_line"
    assert what_followed("  # note", "", at_trace_end=True) == "trace_end"


def test_signal_counts_are_in_the_servers_shape() -> None:
    decisions = [Decision("full", ("abc",)), Decision("line", ("x",)), Decision("words", ("y",))]
    counts = signal_counts([*decisions, REFUSE])
    assert counts == {"accepted": 1, "partial": 2, "refused": 1, "acceptedChars": 5}


def test_the_table_names_each_pass_and_shows_both_counts() -> None:
    result = {
        "user": "tab",
        **user_summary([Decision("full", ("ab",)), REFUSE], chars_written=100, cpu_s=3.0),
        "server_acceptance": {"accepted": 1, "partial": 0, "refused": 2, "acceptedChars": 2},
        "simulator_acceptance": {"accepted": 1, "partial": 0, "refused": 1, "acceptedChars": 2},
    }
    table = markdown_table({pass_name("ghostfim", "tab"): result})
    assert "| metric | ghostfim/tab |" in table
    assert "| accepts (whole / line / words) | 1 (1 / 0 / 0) |" in table
    assert "| ghostfim/status: accepted / partial / refused / chars | 1 / 0 / 2 / 2 |" in table
    assert "| accept rate of suggestions read | 50.0% |" in table
    assert pass_name("ghostfim", "none") == "ghostfim"


def test_accepting_users_get_the_thinking_traces_unless_told() -> None:
    assert think_rate("auto", ["none"]) == THINK_RATES["classic"]
    assert think_rate("auto", ["none", "tab"]) == THINK_RATES["thinking"]
    assert think_rate("classic", ["words"]) == THINK_RATES["classic"]


# --- traces ---------------------------------------------------------------------------------------
def _trace(tmp_path: Path, *, lines: int = 2, rate: float = THINK_RATES["classic"]) -> Trace:
    path = tmp_path / "sample.py"
    path.write_text(SOURCE + "\n")
    trace = make_trace(path, "python", lines_per_file=lines, seed=3, think_rate=rate)
    assert trace is not None
    return trace


def test_thinking_traces_pause_more_and_type_the_same(tmp_path: Path) -> None:
    classic = _trace(tmp_path, lines=4)
    thinking = _trace(tmp_path, lines=4, rate=THINK_RATES["thinking"])
    assert [k.text for k in classic.keystrokes] == [k.text for k in thinking.keystrokes]

    def pauses(trace: Trace) -> int:
        return sum(k.is_pause and bool(k.rest_of_line) for k in trace.keystrokes if not k.jump)

    assert pauses(thinking) > pauses(classic)
    default = make_trace(tmp_path / "sample.py", "python", lines_per_file=4, seed=3)
    assert default == classic  # the classic rate is the default: earlier traces unchanged


def _first_typed(trace: Trace) -> int:
    """A state inside the first line, with at least 6 characters left to type."""
    return next(i for i, k in enumerate(trace.keystrokes) if not k.jump and len(k.rest_of_line) > 6)


def test_an_accept_skips_the_keystrokes_it_typed(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    keys = trace.keystrokes
    i = _first_typed(trace)
    state = keys[i]
    pieces = word_pieces(state.rest_of_line)[:2]
    taken = "".join(pieces)
    walk = Walk(keys, next_index=i + 1)
    steps = walk.accept(i, pieces, first_at_ms=5000.0, key_gap_ms=100.0)
    # Each key reaches the state typing its characters would have reached...
    reached = [index for index, _ in steps]
    assert reached == [i + len(pieces[0]), i + len(taken)]
    for (index, step), piece in zip(steps, pieces, strict=True):
        assert step.text == keys[index].text and step.rest_of_line == keys[index].rest_of_line
        assert step.edit.text == piece and step.edit.start == step.edit.end
    assert steps[0][1].edit.start == (state.line, state.character)
    assert steps[-1][1].text == state.text[: state.offset] + taken + state.text[state.offset :]
    # ... one ordinary gap apart; the last keeps the trace's gap after that state.
    assert [s.at_ms for _, s in steps] == [5000.0, 5100.0]
    assert steps[0][1].gap_ms == 100.0 and steps[-1][1].gap_ms == keys[reached[-1]].gap_ms
    # The user types on from there, on the trace's gaps shifted to the accept's time.
    index, key = walk.type_next()
    assert index == i + len(taken) + 1
    assert key.at_ms == pytest.approx(5100.0 + keys[reached[-1]].gap_ms)
    assert key.text == keys[index].text


def test_an_accept_that_is_not_what_the_trace_types_is_an_error(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    i = _first_typed(trace)
    with pytest.raises(ValueError):
        Walk(trace.keystrokes).accept(i, ["#"], first_at_ms=0.0, key_gap_ms=100.0)


def test_typing_without_accepts_keeps_the_trace_clock(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    walk = Walk(trace.keystrokes)
    typed = [walk.type_next() for _ in range(len(trace.keystrokes))]
    assert walk.done()
    assert [k for _, k in typed] == trace.keystrokes


# --- signals and the screen -----------------------------------------------------------------------
ITEM = {"insertText": "ab", "command": {"command": "ghostfim.accepted", "arguments": ["g1"]}}


def test_signals_count_utf16_units_from_the_items_start() -> None:
    full = accept_signals(Decision("full", ("x😀y",)), ITEM, "")
    assert full == [AcceptSignal(ITEM, True, 4)]  # the emoji is two UTF-16 units
    words = accept_signals(Decision("words", ("ab", " cd")), ITEM, "q")
    assert [(s.full, s.accepted_units) for s in words] == [(False, 3), (False, 6)]


def test_screen_carries_what_was_typed_into_and_remembers_it_was_read() -> None:
    screen = Screen()
    screen.show("width * height", 1.0, origin=1, item=ITEM)
    screen.read = True
    assert screen.after_edit("wid", jump=False, now=2.0) == "th * height"
    assert screen.read and screen.since == 2.0 and screen.typed_into_item == "wid"
    assert screen.shown_item() == {**ITEM, "insertText": "width * height"}
    screen.show("th * height", 2.1, origin=2)  # the answer for the new state: the same
    assert screen.read and screen.since == 2.0
    screen.show("th * height + 1", 2.2, origin=2)  # grown while streaming: the same
    assert screen.read and screen.text == "th * height + 1"
    screen.show("th * height", 2.3, origin=2)  # an older, shorter copy of it
    assert screen.text == "th * height + 1"
    screen.show("x", 2.4, origin=3)  # a different suggestion: not read yet
    assert not screen.read and screen.since == 2.4 and screen.item is None
    assert screen.after_edit("y", jump=False, now=3.0) == "" and not screen.read


# --- the loop, against a fake editor --------------------------------------------------------------
class PerfectEditor:
    """Shows the rest of the line `delay_s` after each keystroke; records what it was sent."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.screen = Screen()
        self.sent: list[tuple[int, Keystroke, AcceptSignal | None]] = []
        self.version = 0

    async def open(self, trace: Trace) -> None:
        pass

    async def keystroke(
        self, trace: Trace, index: int, key: Keystroke, signal: AcceptSignal | None
    ) -> Record | None:
        self.sent.append((index, key, signal))
        self.version += 1
        self.screen.after_edit(key.edit.text, jump=key.jump, now=time.perf_counter())
        version, item = self.version, {"command": {"arguments": [f"g{self.version}"]}}

        def show() -> None:
            if version == self.version and key.rest_of_line:
                self.screen.show(key.rest_of_line, time.perf_counter(), origin=version, item=item)

        asyncio.get_running_loop().call_later(self.delay_s, show)
        return None if key.jump else new_record(trace, index, key, "")

    async def finish(self) -> None:
        pass


def _quick(trace: Trace, factor: float) -> Trace:
    keys = [
        dataclasses.replace(k, at_ms=k.at_ms * factor, gap_ms=k.gap_ms * factor)
        for k in trace.keystrokes
    ]
    return dataclasses.replace(trace, keystrokes=keys)


def _replay(trace: Trace, user: str, editor: PerfectEditor) -> tuple[list[Record], list[Any]]:
    pace = Pace(reaction_ms=20.0, accept_key_ms=5.0)
    return asyncio.run(replay_with_user(trace, editor, user, pace))


def test_the_tab_user_accepts_the_rest_of_the_line_at_the_first_pause(tmp_path: Path) -> None:
    trace = _quick(_trace(tmp_path, rate=1.0), 0.1)  # a pause after every word, 10x faster
    editor = PerfectEditor(delay_s=0.005)
    records, reads = _replay(trace, "tab", editor)
    lines = sum(k.jump for k in trace.keystrokes)
    # Each line: typed up to its first pause, then the rest of it taken whole.
    accepts = [r for r in reads if r.decision.accepted]
    assert len(accepts) == lines and all(r.decision.kind == "full" for r in accepts)
    typed = [k for _, k, s in editor.sent if s is None and not k.jump]
    accepted_chars = sum(r.decision.chars for r in accepts)
    assert len(typed) + accepted_chars == sum(not k.jump for k in trace.keystrokes)
    signals = [s for _, _, s in editor.sent if s is not None]
    assert [s.full for s in signals] == [True] * lines
    assert all(s.item is not None and s.item["insertText"] for s in signals)
    # The document after each line is the trace's: the next jump follows the accept.
    after_accept = [i for i, (_, _, s) in enumerate(editor.sent) if s is not None]
    for position in after_accept[:-1]:
        assert editor.sent[position + 1][1].jump
    assert sum(r["via"] == "accept" for r in records) == lines
    # The ghost text is always right, so nothing read is refused.
    assert all(r.decision.accepted for r in reads)


def test_the_words_user_presses_one_key_per_word(tmp_path: Path) -> None:
    trace = _quick(_trace(tmp_path, rate=1.0), 0.1)
    editor = PerfectEditor(delay_s=0.005)
    # Ghost text that is right only up to its last word: the words user takes the rest.
    original = editor.keystroke

    async def wrong_last_word(trace: Trace, index: int, key: Keystroke, signal: Any) -> Any:
        pieces = word_pieces(key.rest_of_line)
        # " zz" is a word of its own after anything, and never what the user types.
        wrong = "".join(pieces[:-1]) + " zz" if pieces else ""
        return await original(trace, index, dataclasses.replace(key, rest_of_line=wrong), signal)

    editor.keystroke = wrong_last_word  # type: ignore[method-assign]
    _records, reads = _replay(trace, "words", editor)
    accepts = [r for r in reads if r.decision.accepted]
    assert accepts and all(r.decision.kind == "words" for r in accepts)
    first = accepts[0]
    assert first.decision.keys == len(word_pieces(first.rest_of_line)) - 1
    signals = [s for _, _, s in editor.sent if s is not None]
    assert len(signals) == sum(r.decision.keys for r in accepts)
    assert not any(s.full for s in signals)
    units = [s.accepted_units for s in signals[: first.decision.keys]]
    assert units == sorted(units) and units[-1] == len(first.decision.text)


def test_nothing_is_read_when_the_ghost_text_comes_too_late(tmp_path: Path) -> None:
    trace = _quick(_trace(tmp_path, lines=1, rate=1.0), 0.1)
    editor = PerfectEditor(delay_s=0.5)  # later than any gap of the quick trace
    records, reads = _replay(trace, "tab", editor)
    assert reads == []
    assert len(records) == sum(not k.jump for k in trace.keystrokes)


# --- one real run ---------------------------------------------------------------------------------
PREDICTABLE = "\n".join(
    ["import math", ""]
    + [f"result_{i} = combine({i}, left_{i}, right_{i})" for i in range(30)]
    + [""]
)


@pytest.mark.model
@pytest.mark.parametrize("user", ["tab", "words"])
def test_accepts_reach_the_server(tmp_path: Path, user: str) -> None:
    """A short real pass (small model, one line of a file whose lines follow one pattern, a
    pause after every word): the simulator's accepts arrive as ghostfim's accept signals."""
    from bench.replay import run_ghostfim

    path = tmp_path / "pattern.py"
    path.write_text(PREDICTABLE)
    trace = make_trace(path, "python", lines_per_file=1, seed=7, think_rate=1.0)
    assert trace is not None
    result = asyncio.run(run_ghostfim([trace], "small", user=user))
    simulated = signal_counts([r.decision for r in result.reads])
    server = result.server_acceptance
    assert server is not None, "ghostfim/status has no acceptance counts"
    if simulated["accepted"] + simulated["partial"] == 0:
        pytest.skip(
            f"the model was never exactly right when the user read ({len(result.reads)} reads: "
            f"{[r.shown for r in result.reads]}), so there was nothing to accept"
        )
    assert server["accepted"] + server["partial"] > 0, (server, simulated)
    assert (server["accepted"], server["partial"]) == (
        simulated["accepted"],
        simulated["partial"],
    ), (server, simulated)
    assert server["acceptedChars"] >= simulated["acceptedChars"] > 0, (server, simulated)
    assert result.unsignalled_accepts == 0


# --- llama.vim's client, against a fake llama-server ----------------------------------------------
def test_llama_vim_accepts_in_the_client(tmp_path: Path) -> None:
    """Accepting a llama.vim hint edits the buffer as typing would, with no signal at all."""
    import httpx

    from bench.llamavim import LlamaVimEditor

    trace = _quick(_trace(tmp_path, lines=1, rate=1.0), 0.3)
    target = trace.keystrokes[0].rest_of_line  # the line the user types

    async def infill(request: httpx.Request) -> httpx.Response:
        typed = json.loads(request.content)["prompt"].lstrip()
        rest = target[len(typed) :] if target.startswith(typed) else ""
        return httpx.Response(200, json={"content": rest, "timings/prompt_n": 3})

    async def run() -> tuple[LlamaVimEditor, list[Record], list[Any]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(infill)) as http:
            editor = LlamaVimEditor("http://127.0.0.1:1", http)
            pace = Pace(reaction_ms=20.0, accept_key_ms=5.0)
            records, reads = await replay_with_user(trace, editor, "tab", pace)
            return editor, records, reads

    editor, records, reads = asyncio.run(run())
    accepts = [r for r in reads if r.decision.accepted]
    assert accepts and accepts[0].decision.kind == "full" and accepts[0].item_id is None
    assert any(r["via"] == "accept" for r in records)
    assert "\n".join(editor.lines) == trace.keystrokes[-1].text  # the same document at the end
