"""`make e2e E2E_ARGS=--fresh-install`: the extension as a user meets it, with no ghostfim anywhere.

A fresh HOME and user-data folder, a PATH with no `ghostfim` on it (tests/e2e/freshhome.py), a
workspace that is not this checkout, and only the packaged .vsix installed. The extension finds
no server and offers **Set up ghostfim**; the test clicks it, watches the progress notification
(each step, the build's phase, the model download's percentage), and types in a Python file
until ghost text appears: the time from the click to the first ghost text is printed. Then
code-server is started again: the second activation must start the server in seconds, with no
set-up; and once more as if the server had come from an older extension's wheel: that start
installs the wheel this .vsix carries into it first. pip's cache is the machine's (the
llama-cpp-python wheel is not rebuilt); the model comes from ghostfim's own fetch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import e2e
from e2e import CHROMIUM_FLAGS, ROOT, SAMPLE, TYPED_LINE, CheckFailed, Editor, Report, VsCode
from playwright.sync_api import BrowserContext, Page, Playwright, sync_playwright
from playwright.sync_api import Error as PlaywrightError

sys.path.insert(0, str(ROOT))
from tests.e2e.freshhome import fresh_environment

TOASTS_JS = """() => [...document.querySelectorAll('.notifications-toasts .notification-toast')]
  .map((t) => t.innerText.replace(/\\s+/g, ' ').trim())"""
# The steps the progress notification must have named (src/setup.ts's and setupPlan.ts's
# messages), sampled twice a second: finding Python takes less, and shows in the log instead.
STEPS = (
    "Creating a virtual environment",
    "Installing ghostfim",
    "llama.cpp: ",
    "model: ",
    "decode check: ",
)
DOWNLOAD = re.compile(r"model: (downloading|verifying) \d+%")
READY = re.compile(r"\b(tiny|small|medium)\b")


def toasts(page: Page) -> list[str]:
    texts = page.evaluate(TOASTS_JS)
    return [t for t in texts if isinstance(t, str)]


def ready(editor: Editor) -> dict[str, str | None] | None:
    status = editor.status()
    if READY.search(status["text"] or "") and "ready" in (status["label"] or ""):
        return status
    return None


def run_fresh(args: argparse.Namespace) -> int:
    report = Report()
    work = Path(tempfile.mkdtemp(prefix="ghostfim-e2e-fresh-"))
    artifacts = Path(args.artifacts) if args.artifacts else work / "artifacts"
    env = fresh_environment(work / "user", python=args.python)
    vscode = VsCode(work, args.code_server, args.node_bin, None, args.trace, env=env)
    shutil.copy(SAMPLE, vscode.workspace / "stats.py")
    storage = vscode.user_data / "User" / "globalStorage" / "ghostfim.ghostfim"
    current = "setup"
    t_start = time.monotonic()
    timings: dict[str, float] = {}

    @contextlib.contextmanager
    def check(name: str) -> Iterator[None]:
        nonlocal current
        current = name
        began = time.monotonic()
        yield
        report.ok(name, f"{time.monotonic() - began:.1f} s")

    def open_page(playwright: Playwright, profile: str) -> tuple[BrowserContext, Page, Editor]:
        context = playwright.chromium.launch_persistent_context(
            str(work / profile),
            executable_path=args.chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 760},
        )
        page = context.pages[0] if context.pages else context.new_page()
        return context, page, Editor(page)

    try:
        with check("install only the packaged .vsix, with a fresh HOME and no ghostfim on PATH"):
            listed = vscode.install(Path(args.vsix))
            if "ghostfim.ghostfim@" not in listed:
                raise CheckFailed(f"not listed after installing: {listed!r}")
            print(f"   HOME={env['HOME']}\n   PATH={env['PATH']}", flush=True)
        vscode.write_settings()  # nothing of ghostfim's: a user who just installed it
        url = vscode.start()

        with sync_playwright() as playwright:
            context, page, editor = open_page(playwright, "chromium-profile")
            try:
                with check("VS Code's workbench loads in Chromium"):
                    page.goto(url, timeout=60_000)
                    page.wait_for_selector(".monaco-workbench", timeout=90_000)

                with check("no server found: a notification offers Set up and Choose a server"):
                    button = page.locator(
                        ".notifications-toasts .monaco-button", has_text="Set up ghostfim"
                    )
                    button.wait_for(state="visible", timeout=90_000)
                    choose = page.locator(
                        ".notifications-toasts .monaco-button", has_text="Choose a server"
                    )
                    if choose.count() == 0:
                        raise CheckFailed(f"no 'Choose a server…' button: {toasts(page)}")

                with check("Set up ghostfim: progress throughout, then the server is ready"):
                    button.click()
                    clicked = time.monotonic()
                    seen: list[str] = []
                    opened = False
                    deadline = clicked + args.setup_timeout
                    while time.monotonic() < deadline:
                        for text in toasts(page):
                            if "could not be set up" in text or "was cancelled" in text:
                                raise CheckFailed(f"the set-up failed: {text}")
                            if text not in seen:
                                seen.append(text)
                        if not opened:  # the user opens a file while it installs
                            editor.open_file("stats.py")
                            opened = True
                        if ready(editor):
                            break
                        time.sleep(0.5)
                    else:
                        raise CheckFailed(f"not ready after {args.setup_timeout} s: {seen[-5:]}")
                    timings["click to server ready"] = time.monotonic() - clicked
                    joined = "\n".join(seen)
                    missing = [step for step in STEPS if step not in joined]
                    if missing or not DOWNLOAD.search(joined):
                        raise CheckFailed(f"progress lacked {missing or 'a download %'}: {seen}")
                    if "Using Python 3." not in vscode.extension_log():
                        raise CheckFailed("the log does not say which Python made the venv")
                    print(f"   {len(seen)} progress states, e.g.:", flush=True)
                    for text in seen[:: max(1, len(seen) // 12)]:
                        print(f"     {text[:150]}", flush=True)

                with check("ghost text in a Python file, after the set-up"):
                    editor.go_to_line_end(19)
                    samples = editor.type_watching(TYPED_LINE, args.key_delay_ms)
                    samples += editor.watch(
                        60, lambda s: s[-1].ghost is not None and bool(s[-1].ghost.text)
                    )
                    shown = [s for s in samples if s.ghost is not None]
                    if not shown:
                        raise CheckFailed("no ghost text within 60 s of typing")
                    timings["click to first ghost text"] = time.monotonic() - clicked
                    print(f"   ghost text: {shown[-1].ghost!r}", flush=True)

                with check("the server was set up in the extension's storage, not the workspace"):
                    server = storage / "venv" / "bin" / "ghostfim"
                    if not server.is_file() or not (storage / "install.json").is_file():
                        raise CheckFailed(f"nothing in {storage}")
                    files = sorted(p.name for p in vscode.workspace.iterdir())
                    if files != ["stats.py"]:
                        raise CheckFailed(f"the workspace holds {files}")
            except (CheckFailed, PlaywrightError):
                artifacts.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(Exception):
                    page.screenshot(path=str(artifacts / "failure.png"))
                raise
            finally:
                context.close()

            def start_again(profile: str) -> tuple[BrowserContext, Page, Editor, float]:
                """code-server started again (the same user): the seconds from the workbench
                to the server's ready."""
                vscode.stop()
                url = vscode.start()
                context, page, editor = open_page(playwright, profile)
                try:
                    page.goto(url, timeout=60_000)
                    page.wait_for_selector(".monaco-workbench", timeout=90_000)
                    loaded = time.monotonic()
                    editor.open_file("stats.py")
                    e2e.wait_for("the server ready", lambda: ready(editor), 180, 0.25)
                except (CheckFailed, PlaywrightError):
                    artifacts.mkdir(parents=True, exist_ok=True)
                    with contextlib.suppress(Exception):
                        page.screenshot(path=str(artifacts / f"failure-{profile}.png"))
                    context.close()
                    raise
                return context, page, editor, time.monotonic() - loaded

            with check("a second activation starts that server in seconds, no set-up"):
                context, page, editor, took = start_again("chromium-profile-2")
                timings["second activation: workbench to server ready"] = took
                offered = [t for t in toasts(page) if "Set up ghostfim" in t or "setting" in t]
                context.close()
                log = vscode.extension_log()
                if offered or "found via managed" not in log or "setting up the server" in log:
                    raise CheckFailed(f"toasts {offered}; log:\n{log[-2000:]}")

            with check("an updated extension installs its wheel into that server at its start"):
                # As if the server had been set up from an older extension's wheel.
                state_file = storage / "install.json"
                state = json.loads(state_file.read_text(encoding="utf-8"))
                state["wheelSha256"] = "0" * 64
                state_file.write_text(json.dumps(state), encoding="utf-8")
                context, page, editor, took = start_again("chromium-profile-3")
                timings["activation after an update: workbench to server ready"] = took
                context.close()
                log = vscode.extension_log()
                updated = json.loads(state_file.read_text(encoding="utf-8"))["wheelSha256"]
                if "updating the server" not in log or updated == "0" * 64:
                    raise CheckFailed(f"no upgrade (sha {updated}); log:\n{log[-2000:]}")
    except (CheckFailed, PlaywrightError) as failure:
        report.fail(current, str(failure))
    finally:
        vscode.stop()
        if report.failed:
            artifacts.mkdir(parents=True, exist_ok=True)
            (artifacts / "ghostfim.log").write_text(vscode.extension_log(), encoding="utf-8")
            if vscode.log_path.exists():
                shutil.copy(vscode.log_path, artifacts / "code-server.log")
            print(f"--- the extension's log (tail; all of it in {artifacts}):", flush=True)
            print(vscode.extension_log()[-6000:], flush=True)
        if not args.keep and not report.failed:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print(f"kept {work}", flush=True)

    for what, seconds in timings.items():
        print(f"fresh install: {what} {seconds:.1f} s", flush=True)
    print(f"e2e took {time.monotonic() - t_start:.1f} s", flush=True)
    print(f"{len(report.passed)} passed, {len(report.failed)} failed", flush=True)
    return 1 if report.failed else 0
