"""Code with the cursor marked `█`, cut into what the stop and clean-up rules read, and real
files of several languages cut into infill tasks whose right answer is known.

`at(source)` is the cursor context (prefix, suffix, rest of the line, lines above and below);
`infill_tasks(SAMPLES[language])` gives (prefix, middle, suffix) for each line, each call's
arguments and each block's body.
"""

from __future__ import annotations

from ghostfim.engine.text.cursor import CursorContext, opens_block
from ghostfim.engine.text.stops import StopPolicy

CURSOR = "█"


def split(source: str) -> tuple[str, str]:
    assert source.count(CURSOR) == 1
    prefix, suffix = source.split(CURSOR)
    return prefix, suffix


def at(source: str) -> CursorContext:
    return CursorContext.around(*split(source))


def policy(source: str, mode: str = "auto") -> StopPolicy:
    return StopPolicy.for_context(mode, at(source))  # type: ignore[arg-type]


def stopped(source: str, generated: str, mode: str = "auto") -> tuple[str, str]:
    """What the stop rules keep of `generated` (fed as it grows, as decoding does), and why."""
    p = policy(source, mode)
    for end in range(1, len(generated) + 1):
        d = p.check(generated[:end])
        if d.stop:
            return generated[:end][: d.keep] if d.keep >= 0 else generated[:end], d.reason
    return generated, ""


SAMPLES = {
    "python": '''import os


def walk(root, pattern=None):
    """Yield the files under root, sorted."""
    found = []
    for path, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if pattern and not name.endswith(pattern):
                continue
            found.append(os.path.join(path, name))
    return found


class Counter:
    def __init__(self, start=0):
        self.value = start

    def add(self, n):
        self.value += n
        return self.value
''',
    "js": """export function groupBy(items, key) {
  const groups = new Map();
  for (const item of items) {
    const k = typeof key === "function" ? key(item) : item[key];
    if (!groups.has(k)) {
      groups.set(k, []);
    }
    groups.get(k).push(item);
  }
  return groups;
}

const total = (xs) => xs.reduce((a, b) => a + b, 0);
console.log(total([1, 2, 3]), groupBy(["a", "bb"], (s) => s.length));
""",
    "c": """#include <stdio.h>

static int sum(const int *xs, int n) {
\tint total = 0;
\tfor (int i = 0; i < n; i++) {
\t\ttotal += xs[i];
\t}
\treturn total;
}

int main(void) {
\tint xs[] = {1, 2, 3};
\tprintf("%d\\n", sum(xs, (int)(sizeof(xs) / sizeof(xs[0]))));
\treturn 0;
}
""",
    "go": """package main

import "fmt"

func fib(n int) int {
\tif n < 2 {
\t\treturn n
\t}
\treturn fib(n-1) + fib(n-2)
}

func main() {
\tfor i := 0; i < 10; i++ {
\t\tfmt.Println(i, fib(i))
\t}
}
""",
    "lua": """local M = {}

function M.map(t, f)
  local out = {}
  for i, v in ipairs(t) do
    out[i] = f(v)
  end
  return out
end

function M.sum(t)
  local s = 0
  for _, v in ipairs(t) do
    if v ~= nil then
      s = s + v
    end
  end
  return s
end

return M
""",
}


def infill_tasks(source: str) -> list[tuple[str, str, str]]:
    """(prefix, middle, suffix): each line's code after its indentation, each call's arguments
    with the editor's `)` after the cursor, and each block's body after its opener."""
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    tasks = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        tasks.append((source[: starts[i] + ind], line[ind:], source[starts[i] + len(line) :]))
        p, q = line.find("("), line.rfind(")")
        if 0 <= p < q - 1:
            tasks.append((source[: starts[i] + p + 1], line[p + 1 : q], source[starts[i] + q :]))
        if opens_block(line) and i + 1 < len(lines) and lines[i + 1].strip():
            body = []
            for nxt in lines[i + 1 :]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= ind:
                    break
                body.append(nxt)
            while body and not body[-1].strip():
                body.pop()
            if body:
                bi = len(body[0]) - len(body[0].lstrip())
                end = starts[i + 1] + len("\n".join(body))
                middle = "\n".join(body)[bi:]
                tasks.append((source[: starts[i + 1] + bi], middle, source[end:]))
    return tasks
