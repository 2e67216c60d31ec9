#!/usr/bin/env bash
# `make e2e`: installs what is needed (setup.sh, cached outside the repository), then runs the
# packaged extension inside a real VS Code (code-server) driven by headless Chromium (e2e.py).
# Arguments go to e2e.py (--help lists them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# A failed set-up stops here (set -e), before anything runs.
paths="$(bash "$here/setup.sh")"
while IFS='=' read -r name value; do
  case "$name" in
    E2E_*) export "$name=$value" ;;
  esac
done <<< "$paths"

exec "$E2E_PYTHON" "$here/e2e.py" "$@"
