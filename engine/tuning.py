"""Every tuning constant of the keystroke path, in one table: its unit, its value and what chose
it, the way engine/config.py lists the settings and engine/env.py the environment variables.

These are not settings: each was chosen by a benchmark or a measurement (named below; the
figures are in docs/benchmarks.md) or set by hand for a reason given here, and a change to one
is a change of behaviour to measure side by side (bench/replay.py, bench/plan_digest.py). The
modules that use them import them from here; `TABLE` describes each, and
tests/unit/engine/test_tuning.py keeps the two in step and checks no module defines its own.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- the keystroke windows and prefill chunks (engine/local/plan.py) -------------------------
KEYSTROKE_START_MS = 500.0
KEYSTROKE_WIDE_MS = 1500.0
MIN_START_TOKENS = 24
MIN_WIDE_TOKENS = 128
PREFILL_CHUNK_MS = 250.0
BACKGROUND_CHUNK_MS = 100.0
FULL_CHUNK_MS = 1000.0
MIN_CHUNK_TOKENS = 2

# --- the prompt's windows (engine/prompt/builder.py, engine/service/cursor.py) ---------------
PREFIX_SLACK = 1.25
PREFIX_REANCHOR = 0.75
PREFIX_SHARE_OF_ROOM = 0.7
MIN_PREFIX_TOKENS = 16
UNSTABLE_PREFIX_TOKENS = 2
PREFIX_WINDOW_CHARS = 64_000
SUFFIX_WINDOW_CHARS = 16_000

# --- the KV slots (engine/local/kvslots.py, engine/local/loading.py) -------------------------
CELLS_PER_SLOT = 4096
GENERATION_ROOM = 256 + 64
MIN_USEFUL_REUSE = 8
MIN_SNAPSHOT_TOKENS = 32
FAST_PREFILL_MS_PER_TOKEN = 1.0

# --- when to ask the model (engine/service/scheduler.py, followups.py, deadline.py) ----------
DEBOUNCE_MIN_MS = 5.0
DEBOUNCE_MAX_MS = 80.0
DEBOUNCE_SHARE_OF_GAP = 0.75
DEBOUNCE_GAPS = 16
DEBOUNCE_PAUSE_MS = 1000.0
MID_TOKEN_MAX_WAIT_MS = 200.0
PAUSE_REFRESH_S = 0.35
LULL_S = 0.25
PREFETCH_MAX_TOKENS = 24

# --- typed-through reuse (engine/service/suggestions.py) -------------------------------------
PREFIX_KEY_CHARS = 384
SUFFIX_KEY_CHARS = 128
MAX_TYPED_THROUGH = 256

# --- what is worth showing (engine/service/filter.py, acceptance.py, engine/text/stops.py) ---
CALIBRATED_REFUSAL_COST = 4.0
CALIBRATED_SHARPNESS = 0.35
CALIBRATED_FIRST_WORD_MIN_PROB = 0.0
CALIBRATED_ACCEPT_RATE = 0.3
PRIOR_WEIGHT = 8.0
GIVE_UP_BELOW = 0.01
MAX_SHIFT = 2.0
SHIFT_GAIN = 1.0
PER_OUTCOME_DECAY = 0.97
HALF_LIFE_S = 3 * 24 * 3600.0
READ_MS = 250.0
MAX_BLOCK_LINES = 8

# --- context from other files (engine/context/ring.py) ---------------------------------------
AUTO_PREFILL_MS = 3000.0
AUTO_MAX_TOKENS = 1024

# --- the workspace's definitions (engine/prompt/definitions.py) ------------------------------
DEFINITIONS_AUTO_PREFILL_MS = 1500.0
DEFINITIONS_KEYSTROKE_PREFILL_MS = 500.0
DEFINITIONS_AUTO_MAX_TOKENS = 512


@dataclass(frozen=True)
class Tuned:
    name: str
    unit: str
    meaning: str
    chosen_by: str  # the benchmark or measurement that chose the value, or why it is by hand


_REPLAY = "bench/replay.py, docs/history.md"
_CALIBRATION = "bench/calibrate_filter.py on bench/results/filter-calibration.jsonl"

TABLE: tuple[Tuned, ...] = (
    Tuned(
        "KEYSTROKE_START_MS",
        "ms",
        "a new place's keystroke prefix window: what a cold "
        "prefill decodes in this long (a GPU: the whole prefix budget)",
        _REPLAY + ", 'Keystroke replay' (session 3: ghost text at a new place)",
    ),
    Tuned(
        "KEYSTROKE_WIDE_MS",
        "ms",
        "the wider window a background job prepares once the user types at a place",
        _REPLAY + ", 'Keystroke replay' (session 3)",
    ),
    Tuned(
        "MIN_START_TOKENS",
        "tokens",
        "the narrow window's floor",
        "by hand: a line and a half of code, the least that says what is being written",
    ),
    Tuned("MIN_WIDE_TOKENS", "tokens", "the wide window's floor", "by hand: a short function"),
    Tuned(
        "PREFILL_CHUNK_MS",
        "ms",
        "a prefill chunk of text before the cursor: the longest a cancel waits for it on a CPU",
        "by hand: about one gap between keys",
    ),
    Tuned(
        "BACKGROUND_CHUNK_MS",
        "ms",
        "a background prefill's chunk: what the next keystroke's abort loses",
        "bench/file_switch.py and the widen-at-a-lull replay (docs/"
        "history.md, 'Where the model's time goes')",
    ),
    Tuned(
        "FULL_CHUNK_MS",
        "ms",
        "an explicit request's chunk (aborted anywhere by a cancel)",
        "measured: on a CPU a 10-token chunk costs ~24 ms a token, a 48-token one ~21",
    ),
    Tuned("MIN_CHUNK_TOKENS", "tokens", "the smallest prefill chunk", "by hand"),
    Tuned(
        "PREFIX_SLACK",
        "share",
        "the prefix window may grow to this share of its budget "
        "before its start line moves (a moved start line is a cold prompt)",
        "by hand",
    ),
    Tuned(
        "PREFIX_REANCHOR",
        "share",
        "a moved window leaves room for this much more typing",
        "by hand",
    ),
    Tuned(
        "PREFIX_SHARE_OF_ROOM",
        "share",
        "of a KV slot's prompt room, at most this for the prefix window (the suffix gets the rest)",
        "by hand: the layout's quality table (shared/NOTES.md) wants a suffix",
    ),
    Tuned(
        "MIN_PREFIX_TOKENS",
        "tokens",
        "the smallest prefix budget that still says something",
        "by hand",
    ),
    Tuned(
        "UNSTABLE_PREFIX_TOKENS",
        "tokens",
        "the last prefix tokens that may merge with the next typed character (BPE): not reused",
        "by hand: BPE merges span two tokens",
    ),
    Tuned(
        "PREFIX_WINDOW_CHARS",
        "characters",
        "text before the cursor handed to the prompt builder",
        "by hand: far more than any prefix budget (16,384 tokens)",
    ),
    Tuned(
        "SUFFIX_WINDOW_CHARS",
        "characters",
        "text after the cursor handed to it",
        "by hand: as above, for the suffix budget",
    ),
    Tuned(
        "CELLS_PER_SLOT",
        "KV cells",
        "each KV slot's share of the context (full prompts, two keystroke windows)",
        "by hand: the largest budgets plus GENERATION_ROOM",
    ),
    Tuned(
        "GENERATION_ROOM",
        "tokens",
        "cells a slot keeps free beyond its prompt",
        "by hand: maxTokens' default range plus slack",
    ),
    Tuned(
        "MIN_USEFUL_REUSE",
        "tokens",
        "a prompt is written into a slot only when it shares this much with it",
        "by hand: less re-prefills in a moment",
    ),
    Tuned(
        "MIN_SNAPSHOT_TOKENS",
        "tokens",
        "a window worth snapshotting when overwritten",
        "by hand: less re-prefills in a moment",
    ),
    Tuned(
        "FAST_PREFILL_MS_PER_TOKEN",
        "ms/token",
        "a prefill faster than this is a GPU's: GPU policy",
        "by hand: the 2-core CPUs here prefill at 8-20 ms a token, a GPU far under 1",
    ),
    Tuned(
        "DEBOUNCE_MIN_MS",
        "ms",
        "the adaptive debounce's wait when the model is quicker than the next key",
        "by hand: every millisecond of waiting is latency",
    ),
    Tuned("DEBOUNCE_MAX_MS", "ms", "its longest wait while typing", "by hand"),
    Tuned(
        "DEBOUNCE_SHARE_OF_GAP",
        "share",
        "its wait as a share of the typical gap between "
        "keys, when the next key is likely to come first",
        "by hand",
    ),
    Tuned("DEBOUNCE_GAPS", "keys", "gaps between keys the typing rhythm is taken from", "by hand"),
    Tuned(
        "DEBOUNCE_PAUSE_MS", "ms", "a gap this long is a pause, not part of the rhythm", "by hand"
    ),
    Tuned(
        "MID_TOKEN_MAX_WAIT_MS",
        "ms",
        "the longest a request inside an unsure token waits",
        "bench/replay.py words user (docs/history.md, the mid-word wait)",
    ),
    Tuned(
        "PAUSE_REFRESH_S",
        "s",
        "a pause this long gets the full prompt (when the keystroke one cut the suffix)",
        "by hand: longer than most gaps between keys",
    ),
    Tuned(
        "LULL_S",
        "s",
        "background work waits for a lull this long (longer than most gaps between keys)",
        "bench/replay.py, the widen at a lull (docs/history.md)",
    ),
    Tuned(
        "PREFETCH_MAX_TOKENS",
        "tokens",
        "the suggestion after an accepted one, prepared ahead",
        "by hand: a short line",
    ),
    Tuned(
        "PREFIX_KEY_CHARS",
        "characters",
        "text before the cursor that identifies a state in the suggestion cache",
        "by hand",
    ),
    Tuned("SUFFIX_KEY_CHARS", "characters", "text after the cursor in that key", "by hand"),
    Tuned(
        "MAX_TYPED_THROUGH",
        "characters",
        "characters typed into a suggestion that can still be matched",
        "by hand: past the longest suggestion (maxTokens 64 tokens)",
    ),
    Tuned("CALIBRATED_REFUSAL_COST", "", "the confidence rule's cost of a refusal", _CALIBRATION),
    Tuned("CALIBRATED_SHARPNESS", "", "the confidence rule's sharpness", _CALIBRATION),
    Tuned(
        "CALIBRATED_FIRST_WORD_MIN_PROB",
        "probability",
        "the least probability of a suggestion's first word",
        _CALIBRATION,
    ),
    Tuned(
        "CALIBRATED_ACCEPT_RATE",
        "share",
        "read suggestions users took on the calibration data: each place's prior",
        _CALIBRATION,
    ),
    Tuned("PRIOR_WEIGHT", "outcomes", "what the prior is worth", "by hand"),
    Tuned(
        "GIVE_UP_BELOW",
        "probability",
        "generation stops once the text's own chance falls below this",
        "bench/calibrate_filter.py give-up",
    ),
    Tuned(
        "MAX_SHIFT",
        "log units",
        "how far a place's refusal cost may move (x0.14 .. x7.4)",
        "by hand",
    ),
    Tuned(
        "SHIFT_GAIN",
        "log units per log-odds",
        "how far it moves per log-odds of accept rate away from the prior",
        "by hand",
    ),
    Tuned(
        "PER_OUTCOME_DECAY",
        "factor",
        "each new outcome at a place weighs the older ones this much less",
        "by hand",
    ),
    Tuned("HALF_LIFE_S", "s", "the evidence halves in weight every three days", "by hand"),
    Tuned(
        "READ_MS",
        "ms",
        "on screen this long, a suggestion was read (a refusal counts from here)",
        "by hand: reading time of a short line",
    ),
    Tuned(
        "MAX_BLOCK_LINES",
        "lines",
        "the longest block suggestion",
        "measured on 15,420 block spans of real code (engine/text/stops.py)",
    ),
    Tuned(
        "AUTO_PREFILL_MS",
        "ms",
        "extraContextTokens 'auto': what a cold prefill decodes in this long",
        "by hand: a pause's worth",
    ),
    Tuned("AUTO_MAX_TOKENS", "tokens", "... at most this many", "by hand"),
    Tuned(
        "DEFINITIONS_AUTO_PREFILL_MS",
        "ms",
        "workspaceContextTokens 'auto': what a cold prefill decodes in this long",
        "bench/context_layout.py: two snippets took ~200 tokens (up to 320); the block is "
        "prefilled at a pause or a new place, and for keystrokes at a lull",
    ),
    Tuned(
        "DEFINITIONS_KEYSTROKE_PREFILL_MS",
        "ms",
        "... for keystroke prompts: their block is prefilled in a document's first prompt",
        "bench/workspace_bench.py replay: a 300-token block made the first ghost text after "
        "opening a file later than the 2 s a user reads (4 of 30 shown, against 30 of 30 off); "
        "this one's (~120 tokens here) on screen at 1.2 s (p90 1.3 s), `--part dwell`",
    ),
    Tuned(
        "DEFINITIONS_AUTO_MAX_TOKENS",
        "tokens",
        "... at most this many",
        "bench/context_layout.py (budget comparison)",
    ),
)
