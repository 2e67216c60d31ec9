"""The VS Code extension end to end, inside a real VS Code: code-server driven by headless Chromium.

Run by `make e2e` (through run.sh, which installs code-server, Node 24 and Playwright outside the
repository first). It installs the packaged `.vsix` with `code-server --install-extension`,
points `ghostfim.serverPath` at the repository's server, and then acts as a user would, with
real key events in the browser:

1. with `ghostfim.enable` off globally and on for Python, opens a Python file and types a line
   character by character: VS Code's ghost text appears in the DOM;
2. Tab accepts it: the saved file has the line with the suggestion, and nothing doubled; VS Code
   runs the item's command, and the server counts an accept (its ghostfim/status, shown in the
   status bar's tooltip: "accepted 1 · partial 0 · ...");
3. the status bar names the model and the time to first token;
4. in a new function, the block suggestion grows while it streams (same cursor, longer text):
   the first characters, then the whole block in their place; Ctrl+Right (the extension's
   accept-next-word) takes its first word and the server counts a partial accept;
5. a line typed in one burst, then Tab: the accepted line holds the typed characters once;
6. `ghostfim.model.size` changed in the Settings editor switches the model without a restart;
7. a Markdown file is off by default (prose is left out), shown in the status bar.

A screenshot of the block as ghost text goes to docs/vscode-ghost-text.png (--screenshot). On
failure the code-server, extension and server logs and a screenshot are kept (--artifacts).
Prints one line a check and closes with "N passed, N failed".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[3]
T = TypeVar("T")

# The Python file the user edits: the README's example, whose stddev() body is empty.
SAMPLE = ROOT / "docs" / "examples" / "stats.py"
TYPED_LINE = "return math.sq"  # typed at the end of line 19, "    " (inside stddev)
FAST_PREFIX = "values = sor"  # typed in one burst inside a new function

# Chromium as the brief for this test wants it: headless, no network of its own, fresh profile.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# VS Code's ghost text in 1.139: the part on the cursor's line is spans of class
# ghost-text-decoration; the lines below it are spans of class ghost-text, one parent element per
# line (a view zone). Spaces are rendered as no-break spaces. Read from the focused editor only.
GHOST_JS = """() => {
  const editor = document.querySelector('.monaco-editor.focused');
  if (!editor) return null;
  const clean = (s) => (s || '').replace(/\\u00a0/g, ' ');
  const inline = [...editor.querySelectorAll('.ghost-text-decoration')]
    .map((e) => clean(e.textContent))
    .join('');
  const lines = new Map();
  for (const span of editor.querySelectorAll('.ghost-text')) {
    const line = span.parentElement;
    if (!lines.has(line)) lines.set(line, []);
    lines.get(line).push(clean(span.textContent));
  }
  const extra = [...lines.entries()]
    .map(([line, parts]) => ({ top: line.getBoundingClientRect().top, text: parts.join('') }))
    .sort((a, b) => a.top - b.top)
    .map((e) => e.text);
  return { inline, extra };
}"""

STATUS_JS = """() => {
  const items = [...document.querySelectorAll('.statusbar-item')];
  const ours = items.find((e) => (e.id || '').endsWith('ghostfim.status'));
  const cursor = items.find((e) => e.id === 'status.editor.selection');
  return {
    text: ours ? ours.textContent.trim() : null,
    label: ours ? ours.getAttribute('aria-label') : null,
    cursor: cursor ? cursor.textContent.trim() : null,
  };
}"""


class CheckFailed(Exception):
    pass


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.1) -> T:
    """The first truthy value of probe() within timeout seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@dataclass
class Ghost:
    inline: str
    extra: list[str]

    @property
    def text(self) -> str:
        return "\n".join([self.inline, *self.extra]) if self.extra else self.inline


@dataclass
class Sample:
    t: float
    cursor: str
    ghost: Ghost | None


@dataclass
class Report:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def ok(self, name: str, detail: str = "") -> None:
        self.passed.append(name)
        print(f"ok - {name}{f': {detail}' if detail else ''}", flush=True)

    def fail(self, name: str, detail: str) -> None:
        self.failed.append(name)
        print(f"FAIL - {name}: {detail}", flush=True)


def write_json(path: Path, value: Any) -> None:
    """Rewrites the file in place, as an editor saves it: VS Code watches the file itself, and a
    rename over it (a new inode) is not seen as a change of it."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(value, indent=2))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VsCode:
    """One code-server with its own user data, extensions and workspace, on 127.0.0.1."""

    def __init__(
        self,
        work: Path,
        code_server: str,
        node_bin: str,
        server: Path | None,
        trace: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.work = work
        self.code_server = code_server
        self.user_data = work / "user-data"
        self.extensions = work / "extensions"
        self.workspace = work / "workspace"
        self.settings_file = self.user_data / "User" / "settings.json"
        self.machine_settings_file = self.user_data / "Machine" / "settings.json"
        self.port = free_port()
        self.server = server
        self.trace = trace
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = work / "code-server.log"
        self.env = dict(os.environ if env is None else env)
        self.env["PATH"] = f"{node_bin}{os.pathsep}{self.env.get('PATH', '')}"
        if env is None:
            # code-server keeps a little state in the XDG folders; keep it out of the user's
            # home. (A fresh user's environment has XDG folders of its own.)
            self.env["XDG_CONFIG_HOME"] = str(work / "xdg-config")
            self.env["XDG_DATA_HOME"] = str(work / "xdg-data")
            # So does the server (acceptance statistics, which its filter starts from): every
            # run starts from none, whatever earlier runs or the user's own editing refused.
            self.env["GHOSTFIM_STATE_DIR"] = str(work / "ghostfim-state")
        self.config = work / "code-server.yaml"
        self.config.write_text(
            f"bind-addr: 127.0.0.1:{self.port}\nauth: none\ncert: false\n"
            "disable-telemetry: true\ndisable-update-check: true\n",
            encoding="utf-8",
        )
        for folder in (
            self.user_data / "User",
            self.user_data / "Machine",
            self.extensions,
            self.workspace,
        ):
            folder.mkdir(parents=True, exist_ok=True)

    def base_args(self) -> list[str]:
        return [
            self.code_server,
            "--config",
            str(self.config),
            "--user-data-dir",
            str(self.user_data),
            "--extensions-dir",
            str(self.extensions),
        ]

    def install(self, vsix: Path) -> str:
        run = subprocess.run(
            [*self.base_args(), "--install-extension", str(vsix), "--force"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        out = run.stdout + run.stderr
        if run.returncode != 0 or "successfully installed" not in out:
            raise CheckFailed(f"--install-extension failed ({run.returncode}):\n{out[-3000:]}")
        listed = subprocess.run(
            [*self.base_args(), "--list-extensions", "--show-versions"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return listed.stdout.strip()

    def write_settings(self, **ghostfim: Any) -> None:
        settings: dict[str, Any] = {
            # No network, no telemetry, nothing that pops up over the editor.
            "telemetry.telemetryLevel": "off",
            "update.mode": "none",
            "extensions.autoCheckUpdates": False,
            "extensions.autoUpdate": False,
            "extensions.ignoreRecommendations": True,
            "workbench.enableExperiments": False,
            "workbench.startupEditor": "none",
            "workbench.secondarySideBar.defaultVisibility": "hidden",
            "workbench.tips.enabled": False,
            "chat.disableAIFeatures": True,
            "security.workspace.trust.enabled": False,
            "git.enabled": False,
            "workbench.colorTheme": "Default Dark Modern",
            # Only ghost text: the suggest widget would take Tab.
            "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
            "editor.suggestOnTriggerCharacters": False,
            "editor.wordBasedSuggestions": "off",
            "editor.inlineSuggest.enabled": True,
            "editor.minimap.enabled": False,
            "editor.fontSize": 15,
            "files.autoSave": "off",
        }
        if self.trace:
            settings["ghostfim.trace.server"] = "verbose"
        for key, value in ghostfim.items():
            if key.startswith("["):
                settings[key] = value
            else:
                settings[f"ghostfim.{key.replace('__', '.')}"] = value
        write_json(self.settings_file, settings)
        # Machine-scoped settings (serverPath) are read from the remote machine's settings in a
        # remote window, which is what code-server's window is; its user settings' values are not
        # applied there ("This setting cannot be applied in this window").
        machine = {} if self.server is None else {"ghostfim.serverPath": str(self.server)}
        write_json(self.machine_settings_file, machine)

    def start(self) -> str:
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                *self.base_args(),
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                "--ignore-last-opened",
                str(self.workspace),
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its extension host and our server die with it (stop())
        )
        url = f"http://127.0.0.1:{self.port}/?folder={self.workspace}"

        def listening() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise CheckFailed(f"code-server exited: {self.log_path.read_text()[-3000:]}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.5),
            ):
                return True
            return False

        wait_for("code-server to listen", listening, 60, 0.2)
        return url

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def extension_log(self) -> str:
        logs = sorted(self.user_data.glob("logs/*/exthost*/ghostfim.ghostfim/ghostfim.log"))
        return logs[-1].read_text(errors="replace") if logs else ""


class Editor:
    """The workbench page, seen and driven as a user would."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def status(self) -> dict[str, str | None]:
        return self.page.evaluate(STATUS_JS)

    def ghost(self) -> Ghost | None:
        found = self.page.evaluate(GHOST_JS)
        if not found or not (found["inline"] or any(found["extra"])):
            return None
        return Ghost(found["inline"], list(found["extra"]))

    def quick_input(self, keys: str, what: str) -> None:
        """Opens a quick input box (Ctrl+P, Ctrl+G), pressing again if the first press is lost."""
        for attempt in range(3):
            self.page.keyboard.press(keys)
            try:
                self.page.wait_for_selector(
                    ".quick-input-widget input", state="visible", timeout=5_000
                )
                return
            except PlaywrightError:
                if attempt == 2:
                    raise CheckFailed(f"{keys} opened no {what} box") from None
                self.page.keyboard.press("Escape")

    def open_file(self, name: str) -> None:
        self.quick_input("Control+P", "Quick Open")
        self.page.keyboard.type(name, delay=20)
        wait_for(
            f"{name} in quick open",
            # The focused row, once the list is filtered (Enter opens that one).
            lambda: self.page.query_selector(
                f'.quick-input-list .monaco-list-row.focused[aria-label*="{name}"]'
            ),
            15,
        )
        self.page.keyboard.press("Enter")
        wait_for(
            f"{name} in the focused editor",
            lambda: (
                self.page.query_selector(f'.tab.active[aria-label*="{name}"]')
                and self.page.query_selector(".monaco-editor.focused")
            ),
            15,
        )

    def go_to_line_end(self, line: int) -> None:
        # Focus the editor's text first (a notification or the status bar may hold the focus).
        self.page.click(".monaco-editor .view-lines")
        self.quick_input("Control+G", "Go to Line")
        self.page.keyboard.type(str(line))
        self.page.keyboard.press("Enter")
        wait_for(
            f"the cursor on line {line}",
            lambda: (self.status()["cursor"] or "").startswith(f"Ln {line},"),
            10,
        )
        self.page.keyboard.press("End")

    def go_to_end(self, lines: int) -> None:
        """Ctrl+End, until the status bar says the cursor is on the last line: a key pressed
        just after the Settings editor closes can reach no editor (CI once typed a whole new
        function into the middle of the file that way)."""
        self.page.click(".monaco-editor .view-lines")

        def at_end() -> bool:
            if (self.status()["cursor"] or "").startswith(f"Ln {lines},"):
                return True
            self.page.keyboard.press("Control+End")
            return False

        wait_for(f"the cursor on the last line ({lines})", at_end, 10, 0.25)

    def set_setting(
        self, key: str, value: str | bool, settings_file: Path, *, is_default: bool = False
    ) -> None:
        """Changes a user setting in the Settings editor (Ctrl+,) as a user does, then waits for
        VS Code to have written it to settings.json. (VS Code here did not notice settings.json
        rewritten behind its back, so the UI is also the dependable way.)"""
        self.page.keyboard.press("Control+Comma")
        search = ".settings-editor .settings-header .monaco-editor"
        self.page.wait_for_selector(search, timeout=20_000)
        self.page.click(search)
        self.page.keyboard.press("Control+A")
        self.page.keyboard.type(key, delay=10)
        control = wait_for(
            f"{key} in the Settings editor",
            lambda: self.page.query_selector(f".settings-editor [aria-label='{key}']"),
            15,
        )
        if isinstance(value, bool):
            checked = control.get_attribute("aria-checked") == "true"
            if checked != value:
                control.click()
        else:
            control.click()
            row = wait_for(
                f"{value!r} in the drop-down",
                lambda: next(
                    (
                        r
                        for r in self.page.query_selector_all(
                            ".select-box-dropdown-list-container .monaco-list-row"
                        )
                        if r.inner_text().split("\n")[0].strip() == value
                    ),
                    None,
                ),
                10,
            )
            row.click()
        needle = f'"{key}": {json.dumps(value)}'
        # Back to the default: VS Code may drop the key.
        default_removed = isinstance(value, bool) or is_default

        def written() -> bool:
            text = settings_file.read_text(encoding="utf-8")
            return needle in text or (default_removed and f'"{key}"' not in text)

        wait_for(f"settings.json to hold {needle}", written, 15)

    def save(self) -> None:
        self.page.keyboard.press("Control+S")

    def type_watching(self, text: str, delay_ms: float) -> list[Sample]:
        """Types one key at a time (real key events), sampling the ghost text between keys."""
        samples: list[Sample] = []
        start = time.monotonic()
        for char in text:
            if char == "\n":
                self.page.keyboard.press("Enter")
            else:
                self.page.keyboard.type(char)
            key_done = time.monotonic()
            while True:
                samples.append(
                    Sample(time.monotonic() - start, self.status()["cursor"] or "", self.ghost())
                )
                if time.monotonic() - key_done >= delay_ms / 1000:
                    break
                time.sleep(0.02)
        return samples

    def watch(
        self, seconds: float, until: Callable[[list[Sample]], bool] | None = None
    ) -> list[Sample]:
        """Samples the cursor and the ghost text about every 40 ms."""
        samples: list[Sample] = []
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            samples.append(
                Sample(time.monotonic() - start, self.status()["cursor"] or "", self.ghost())
            )
            if until is not None and until(samples):
                break
            time.sleep(0.04)
        return samples


def grew(samples: list[Sample]) -> tuple[str, str] | None:
    """Two ghost texts at one cursor position, the later a longer continuation of the earlier."""
    for i, earlier in enumerate(samples):
        if earlier.ghost is None:
            continue
        for later in samples[i + 1 :]:
            if later.cursor != earlier.cursor:
                break
            if (
                later.ghost is not None
                and len(later.ghost.text) > len(earlier.ghost.text)
                and later.ghost.text.startswith(earlier.ghost.text)
            ):
                return earlier.ghost.text, later.ghost.text
    return None


# Longer than the extension's REQUERY_WAIT_MS: an early answer unchanged for this long never grows.
BLOCK_GROWTH_WAIT_S = 16.0


def at_last_cursor_grew(samples: list[Sample]) -> tuple[str, str] | None:
    """`grew` over the samples taken at the latest cursor position."""
    return grew([s for s in samples if s.cursor == samples[-1].cursor]) if samples else None


def transitions(samples: list[Sample], last: int = 12) -> list[tuple[float, str, str | None]]:
    """The changes of (cursor, ghost text) seen, for a failure message."""
    seen: list[tuple[float, str, str | None]] = []
    for sample in samples:
        item = (round(sample.t, 2), sample.cursor, sample.ghost.text if sample.ghost else None)
        if not seen or seen[-1][1:] != item[1:]:
            seen.append(item)
    return seen[-last:]


def settled(samples: list[Sample], quiet: float = 1.5) -> bool:
    """Ghost text shown and unchanged for `quiet` seconds."""
    last = samples[-1]
    if last.ghost is None:
        return False
    for sample in reversed(samples):
        if (
            sample.ghost is None
            or sample.ghost.text != last.ghost.text
            or sample.cursor != last.cursor
        ):
            return False
        if last.t - sample.t >= quiet:
            return True
    return False


TIME_RE = re.compile(r"(<1ms|\d+(?:\.\d+)?m?s)\b")
# The server's acceptance counts, as the status bar's tooltip says them (src/status.ts).
ACCEPTANCE_RE = re.compile(r"accepted (\d+) · partial (\d+) · refused (\d+)")


def acceptance(editor: Editor) -> tuple[int, int, int] | None:
    """(accepted, partial, refused) from the status bar's tooltip, None before it has them."""
    match = ACCEPTANCE_RE.search(editor.status()["label"] or "")
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def counted(editor: Editor, index: int, above: int) -> tuple[int, int, int] | None:
    """The counts once the one at `index` (0 accepted, 1 partial) is above `above`."""
    now = acceptance(editor)
    return now if now is not None and now[index] > above else None


def status_ready(editor: Editor, model: str) -> dict[str, str | None] | None:
    status = editor.status()
    text, label = status["text"] or "", status["label"] or ""
    if re.search(rf"\b{model}\b", text) and "ready" in label:
        return status
    return None


def run(args: argparse.Namespace) -> int:
    report = Report()
    work = Path(tempfile.mkdtemp(prefix="ghostfim-e2e-"))
    artifacts = Path(args.artifacts) if args.artifacts else work / "artifacts"
    vscode = VsCode(work, args.code_server, args.node_bin, Path(args.server), args.trace)
    shutil.copy(SAMPLE, vscode.workspace / "stats.py")
    (vscode.workspace / "notes.md").write_text("# Notes\n\nSome prose.\n", encoding="utf-8")
    stats_file = vscode.workspace / "stats.py"
    current = "setup"
    shot_taken = False
    t_start = time.monotonic()

    @contextlib.contextmanager
    def check(name: str) -> Iterator[None]:
        nonlocal current
        current = name
        began = time.monotonic()
        yield
        report.ok(name, f"{time.monotonic() - began:.1f} s")

    try:
        with check("install the packaged .vsix with code-server --install-extension"):
            listed = vscode.install(Path(args.vsix))
            if "ghostfim.ghostfim@" not in listed:
                raise CheckFailed(f"not listed after installing: {listed!r}")
        # Off globally, on for Python: the per-language override must work this way round too.
        vscode.write_settings(
            enable=False, model__size=args.model, **{"[python]": {"ghostfim.enable": True}}
        )
        url = vscode.start()

        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(work / "chromium-profile"),
                executable_path=args.chromium,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1280, "height": 760},
            )
            page = context.pages[0] if context.pages else context.new_page()
            editor = Editor(page)
            try:
                with check("VS Code's workbench loads in Chromium"):
                    page.goto(url, timeout=60_000)
                    page.wait_for_selector(".monaco-workbench", timeout=90_000)
                    wait_for("the status bar", lambda: page.query_selector(".statusbar-item"), 60)

                with check(f"the server starts and loads {args.model} (status bar)"):
                    editor.open_file("stats.py")
                    wait_for(
                        f"{args.model} ready in the status bar",
                        lambda: status_ready(editor, args.model),
                        180,
                        0.25,
                    )

                # 1. Type a line character by character (off globally, on for Python).
                with check("ghost text appears while a line is typed character by character"):
                    editor.go_to_line_end(19)
                    samples = editor.type_watching(TYPED_LINE, args.key_delay_ms)
                    samples += editor.watch(30, settled)
                    shown = [s for s in samples if s.ghost is not None]
                    if not shown:
                        raise CheckFailed("no .ghost-text-decoration appeared in 30 s")
                    final = samples[-1].ghost
                    if final is None:
                        raise CheckFailed(
                            f"the ghost text went away: {[s.ghost for s in shown][-5:]}"
                        )
                    print(
                        f"   ghost text: {final.text!r}; first seen {shown[0].t:.2f} s "
                        "after the first key",
                        flush=True,
                    )
                # 2. Tab accepts it into the document.
                with check("Tab accepts the suggestion into the document"):
                    page.keyboard.press("Tab")
                    # (a new suggestion may show at once after the accepted one: read the file)
                    editor.save()
                    expected = f"    {TYPED_LINE}{final.inline}"

                    def saved_line() -> str | None:
                        lines = stats_file.read_text(encoding="utf-8").splitlines()
                        return lines[18] if len(lines) > 18 and lines[18] == expected else None

                    try:
                        wait_for("the saved line", saved_line, 10)
                    except CheckFailed:
                        line = stats_file.read_text(encoding="utf-8").splitlines()[18]
                        raise CheckFailed(f"line 19 is {line!r}, expected {expected!r}") from None

                # 2b. VS Code ran the item's command (ghostfim.accepted, registered by
                # languageclient from the server's executeCommandProvider): the server counted it.
                with check("after Tab the server counts an accept (its status, in the tooltip)"):
                    counts = wait_for(
                        "accepted 1 or more in the status bar's tooltip",
                        lambda: counted(editor, 0, 0),
                        15,
                    )
                    label = editor.status()["label"] or ""
                    print(f"   tooltip: {label!r}", flush=True)
                    if counts[1] != 0:
                        raise CheckFailed(f"a partial accept counted for Tab: {counts}")

                # 3. The status bar: model and time to first token.
                with check("the status bar shows the model and the time to first token"):
                    status = wait_for(
                        "a time to first token", lambda: status_ready(editor, args.model), 10
                    )
                    text = status["text"] or ""
                    if not TIME_RE.search(text) or "Time to first token" not in (
                        status["label"] or ""
                    ):
                        raise CheckFailed(f"status bar says {text!r} ({status['label']!r})")
                    print(f"   status bar: {text!r}", flush=True)

                # 4. A block suggestion streams: at one cursor position it grows. This checks
                # the streaming of what the model writes, so the confidence filter (which may
                # end a block after its first line) is off for it and the next check.
                editor.set_setting("ghostfim.filter", "off", vscode.settings_file)
                editor.open_file("stats.py")  # back from the Settings editor
                with check("the ghost text grows while it streams (a block in a new function)"):
                    editor.go_to_end(len(stats_file.read_text(encoding="utf-8").split("\n")))
                    samples = editor.type_watching("\n\ndef median(values):\n", args.key_delay_ms)
                    # The grown block replaces the early answer once its generation is done (the
                    # extension waits for it up to REQUERY_WAIT_MS, 15 s): a few seconds here, more
                    # on a slower machine (CI once took over 5 s), so wait for the growth itself.
                    watched = editor.watch(
                        30,
                        lambda got: (
                            at_last_cursor_grew(samples + got) is not None
                            or settled(got, BLOCK_GROWTH_WAIT_S)
                        ),
                    )
                    samples += watched
                    # On the new line: the block is the suggestion that streams longest.
                    growth = at_last_cursor_grew(samples)
                    if growth is None:
                        if args.keep:
                            html = page.evaluate(
                                "() => [...document.querySelectorAll("
                                "'.monaco-editor.focused [class*=ghost]')]"
                                ".map(e => e.outerHTML.slice(0, 600)).join('\\n')"
                            )
                            (work / "ghost.html").write_text(html, encoding="utf-8")
                        raise CheckFailed(
                            "the ghost text never grew at one cursor position: "
                            f"{transitions(samples)}"
                        )
                    grown_at = next(
                        (s.t for s in watched if s.ghost and s.ghost.text == growth[1]), 0.0
                    )
                    print(
                        f"   grew from {growth[0]!r} to {growth[1]!r}, "
                        f"{grown_at:.1f} s after the last key",
                        flush=True,
                    )
                    if args.screenshot:  # the whole block as ghost text, the status bar below
                        Path(args.screenshot).parent.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=args.screenshot)
                        shot_taken = True

                # 4b. A word of the block: the extension's Ctrl+Right runs VS Code's accept-next-
                # word, then tells the server (a partial accept runs no command). A block has
                # several lines, so one word never takes all of it.
                with check("Ctrl+Right takes a word of the block; the server counts a partial"):
                    before = acceptance(editor) or (0, 0, 0)
                    cursor = editor.status()["cursor"]
                    page.keyboard.press("Control+ArrowRight")
                    counts = wait_for(
                        "partial accepts to go up in the status bar's tooltip",
                        lambda: counted(editor, 1, before[1]),
                        15,
                    )
                    moved = editor.status()["cursor"]
                    if moved == cursor:
                        raise CheckFailed(f"the cursor did not move ({cursor}): nothing inserted")
                    print(f"   counts {before} -> {counts}; cursor {cursor} -> {moved}", flush=True)
                    page.keyboard.press("Escape")
                    wait_for("Escape to hide the ghost text", lambda: editor.ghost() is None, 10)
                    # Take the word back out: the next check types on an empty line.
                    page.keyboard.press("Control+Z")
                    wait_for(
                        "the cursor back where the word was inserted",
                        lambda: editor.status()["cursor"] == cursor,
                        10,
                    )

                editor.set_setting(
                    "ghostfim.filter", "adaptive", vscode.settings_file, is_default=True
                )
                editor.open_file("stats.py")
                # 5. Typed fast, accepted at once: nothing doubled.
                with check("a line typed in one burst, then Tab, holds the typed text once"):
                    page.keyboard.type(FAST_PREFIX, delay=0)
                    samples = editor.watch(
                        30, lambda s: s[-1].ghost is not None and bool(s[-1].ghost.inline)
                    )
                    ghost = samples[-1].ghost
                    if ghost is None or not ghost.inline:
                        raise CheckFailed("no ghost text after the burst")
                    page.keyboard.press("Tab")
                    # (a new suggestion may show at once after the accepted one: read the file)
                    editor.save()

                    def accepted_line() -> str | None:
                        lines = stats_file.read_text(encoding="utf-8").splitlines()
                        found = next((x for x in reversed(lines) if FAST_PREFIX in x), "")
                        return found if found.strip() != FAST_PREFIX else None

                    line = wait_for("the accepted line in the saved file", accepted_line, 10)
                    print(f"   accepted line: {line!r} (ghost was {ghost.inline!r})", flush=True)
                    # Accepting inserts what is shown (it may have grown since it was read), after
                    # the typed text, which must be there once: "sor" + "sorted" would be the bug.
                    # (The indentation is VS Code's, not ours.)
                    typed = line.lstrip()
                    if not typed.startswith(FAST_PREFIX) or not typed[
                        len(FAST_PREFIX) :
                    ].startswith(ghost.inline):
                        raise CheckFailed(
                            f"typed text doubled or lost: {line!r}, "
                            f"the suggestion was {ghost.inline!r}"
                        )

                # 6. Switch the model in the Settings editor: no restart, the status names it.
                other = "tiny" if args.model != "tiny" else "small"
                with check(
                    f"ghostfim.model.size {args.model} -> {other} "
                    "switches the model without a restart"
                ):
                    editor.set_setting("ghostfim.model.size", other, vscode.settings_file)
                    editor.open_file("stats.py")
                    status = wait_for(
                        f"{other} ready in the status bar",
                        lambda: status_ready(editor, other),
                        120,
                        0.25,
                    )
                    starts = vscode.extension_log().count("Starting ")
                    if starts != 1:
                        raise CheckFailed(f"the server was started {starts} times")
                    print(f"   status bar: {status['text']!r}", flush=True)

                # 7. Prose is off by default; the status bar says so for a Markdown file.
                with check("Markdown is off by default (status bar), Python stays on"):
                    editor.set_setting("ghostfim.enable", True, vscode.settings_file)  # on globally
                    editor.open_file("notes.md")
                    wait_for(
                        "'ghostfim off' for Markdown",
                        lambda: "off" in (editor.status()["text"] or ""),
                        15,
                    )
                    editor.open_file("stats.py")
                    wait_for(f"{other} for Python", lambda: status_ready(editor, other), 15)
            except (CheckFailed, PlaywrightError) as failure:
                report.fail(current, str(failure))
                artifacts.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(Exception):
                    page.screenshot(path=str(artifacts / "failure.png"))
                raise
            finally:
                context.close()
    except (CheckFailed, PlaywrightError) as failure:
        if current not in report.failed:
            report.fail(current, str(failure))
    finally:
        vscode.stop()
        failed = bool(report.failed)
        if failed:
            artifacts.mkdir(parents=True, exist_ok=True)
            (artifacts / "ghostfim.log").write_text(vscode.extension_log(), encoding="utf-8")
            if vscode.log_path.exists():
                shutil.copy(vscode.log_path, artifacts / "code-server.log")
            print(f"--- the extension's log (tail; all of it in {artifacts}):", flush=True)
            print(vscode.extension_log()[-4000:], flush=True)
        if not args.keep and not failed:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print(f"kept {work}", flush=True)

    if shot_taken:
        print(f"screenshot: {args.screenshot}", flush=True)
    print(f"e2e took {time.monotonic() - t_start:.1f} s", flush=True)
    print(f"{len(report.passed)} passed, {len(report.failed)} failed", flush=True)
    return 1 if report.failed else 0


def newest_vsix() -> str:
    found = sorted(
        (ROOT / "editors" / "vscode").glob("ghostfim-*.vsix"), key=lambda p: p.stat().st_mtime
    )
    return str(found[-1]) if found else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vsix", default=newest_vsix(), help="the packaged extension (make vsix)")
    parser.add_argument(
        "--server", default=str(ROOT / ".venv" / "bin" / "ghostfim"), help="ghostfim.serverPath"
    )
    parser.add_argument(
        "--model", default="small", choices=("tiny", "small"), help="the model typed against"
    )
    parser.add_argument("--code-server", default=os.environ.get("E2E_CODE_SERVER", "code-server"))
    parser.add_argument(
        "--node-bin", default=os.environ.get("E2E_NODE_BIN", ""), help="Node 24's bin folder"
    )
    parser.add_argument("--chromium", default=os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium"))
    parser.add_argument("--screenshot", default=str(ROOT / "docs" / "vscode-ghost-text.png"))
    parser.add_argument(
        "--artifacts", default="", help="where logs go on failure (default: the work folder)"
    )
    parser.add_argument("--key-delay-ms", type=float, default=120, help="between typed characters")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--trace", action="store_true", help="log the LSP messages (ghostfim.trace.server)"
    )
    parser.add_argument(
        "--fresh-install",
        action="store_true",
        help="a user with no ghostfim anywhere clicks Set up ghostfim (tests/e2e/vscode/fresh.py)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="--fresh-install: its base interpreter is the fresh user's python3",
    )
    parser.add_argument(
        "--setup-timeout", type=float, default=1800, help="--fresh-install: seconds for the set-up"
    )
    args = parser.parse_args(argv)
    if not args.vsix or not Path(args.vsix).is_file():
        parser.error("no .vsix: run `make vsix` first, or pass --vsix")
    if args.fresh_install:
        from fresh import run_fresh

        return run_fresh(args)
    if not Path(args.server).is_file():
        parser.error(f"no server at {args.server}: run `make setup` first, or pass --server")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
