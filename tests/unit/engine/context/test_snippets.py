"""engine/context/snippets.py: windows of lines found by the identifiers they share with the
code before the cursor, in an inverted index that files can change in."""

from __future__ import annotations

from ghostfim.engine.context.snippets import (
    MIN_WORDS,
    WINDOW_LINES,
    WINDOW_STRIDE,
    SnippetStore,
    hide_secret_literals,
    jaccard,
    query_words,
    windows_of,
    words,
)

RETRY = """\
def fetch_with_retry(client, url, attempts):
    for attempt in range(attempts):
        response = client.get(url, timeout=DEFAULT_TIMEOUT)
        if response.status_code == 200:
            return response.json()
        backoff_sleep(attempt)
    raise FetchFailed(url)
"""

PARSER = """\
def parse_header(line):
    name, _, value = line.partition(":")
    return name.strip().lower(), value.strip()


def parse_headers(lines):
    return dict(parse_header(x) for x in lines if x)
"""

# What the user is writing: a loop like fetch_with_retry's.
BEFORE_CURSOR = """\
def post_with_retry(client, url, payload, attempts):
    for attempt in range(attempts):
        response = client.post(url, json=payload, timeout=DEFAULT_TIMEOUT)
        if response.status_code == 200:
            """


def store_of(files: dict[str, str]) -> SnippetStore:
    store = SnippetStore()
    for path, text in files.items():
        store.add(path, windows_of(path, text))
    return store


def test_words_leave_out_what_every_file_says() -> None:
    assert words("for x in range(n): self.run(x)") == frozenset({"x", "range", "n", "run"})
    assert words("const f = function () { return this.y }") == frozenset({"f", "y"})


def test_windows_overlap_by_half_and_skip_those_that_say_too_little() -> None:
    text = "\n".join(f"value_{i} = compute_{i}(source_{i})" for i in range(30))
    found = windows_of("a.py", text)
    assert [w.line for w in found] == list(range(0, 30 - WINDOW_LINES + WINDOW_STRIDE, 6))
    assert all(w.end - w.line <= WINDOW_LINES for w in found)
    assert {"value_0", "compute_0", "source_0"} <= found[0].words
    assert "value_12" not in found[0].words and "value_12" in found[2].words
    assert windows_of("b.py", "\n\n)\n") == []  # fewer than MIN_WORDS identifiers
    assert MIN_WORDS > 1


def test_the_most_similar_window_is_the_code_written_the_same_way() -> None:
    store = store_of({"net.py": RETRY, "parse.py": PARSER})
    query = query_words(BEFORE_CURSOR)
    [best, *_] = store.query(query, 2)
    assert best.path == "net.py" and best.line == 0
    assert best.similarity > 0.3
    # Its similarity is the Jaccard of the identifiers (no common word to leave out here).
    assert best.similarity == jaccard(query, words(RETRY))


def test_lines_the_prompt_holds_are_skipped_and_overlapping_windows_count_once() -> None:
    text = RETRY + "\n\n" + RETRY.replace("fetch_with_retry", "fetch_again")
    store = store_of({"net.py": text})
    query = query_words(BEFORE_CURSOR)
    hits = store.query(query, 3)
    assert all(not (a.line < b.end and b.line < a.end) for a in hits for b in hits if a is not b)
    first = hits[0]
    skipped = store.query(query, 3, skip=[("net.py", first.line, first.end)])
    assert all(not (h.line < first.end and h.end > first.line) for h in skipped)


def test_a_changed_file_replaces_its_windows_and_a_removed_one_leaves() -> None:
    store = store_of({"net.py": RETRY, "parse.py": PARSER})
    query = query_words(BEFORE_CURSOR)
    assert store.query(query, 1)[0].path == "net.py"
    store.add("net.py", windows_of("net.py", PARSER))  # rewritten: nothing like it now
    assert all(h.path != "net.py" or h.similarity < 0.3 for h in store.query(query, 2))
    store.remove("net.py")
    store.remove("parse.py")
    assert len(store) == 0 and store.query(query, 2) == []


def test_compaction_keeps_what_is_live_and_the_estimate_shrinks() -> None:
    store = SnippetStore()
    for round_ in range(60):  # many rewrites of one file: dead windows pile up, then go
        text = "\n".join(
            f"item_{round_}_{i} = build(part_{i}, size_{i}, name_{i})" for i in range(200)
        )
        store.add("big.py", windows_of("big.py", text))
    store.add("net.py", windows_of("net.py", RETRY))
    assert len(store) == len(windows_of("big.py", text)) + len(windows_of("net.py", RETRY))
    assert store.query(query_words(BEFORE_CURSOR), 1)[0].path == "net.py"
    held = store.nbytes
    store.remove("big.py")
    assert store.nbytes < held
    assert store.query(query_words(BEFORE_CURSOR), 1)[0].path == "net.py"


def test_words_in_most_windows_do_not_rank_them() -> None:
    # "common_word" is in every window of 600 files; the rare words decide.
    files = {
        f"f{i}.py": f"common_word = other_{i}(common_word, thing_{i}, more_{i}, stuff_{i})"
        for i in range(600)
    }
    files["target.py"] = "rare_alpha = rare_beta(common_word, rare_gamma, rare_delta)"
    store = store_of(files)
    query = frozenset({"common_word", "rare_alpha", "rare_beta", "rare_gamma"})
    assert store.query(query, 1)[0].path == "target.py"


def test_secret_literals_never_leave_the_workspace() -> None:
    code = (
        'API_KEY = "sk-live-0123456789"\n'
        "password: str = 'hunter2hunter2'\n"
        'headers = {"token": "abcdefgh12345"}\n'
        "const apiKey = `xyz123456789`\n"
        'name = "an ordinary string"\n'
    )
    hidden = hide_secret_literals(code)
    for secret in ("sk-live-0123456789", "hunter2hunter2", "abcdefgh12345", "xyz123456789"):
        assert secret not in hidden
    assert 'API_KEY = "***"' in hidden and "password: str = '***'" in hidden
    assert 'name = "an ordinary string"' in hidden  # other strings stay
