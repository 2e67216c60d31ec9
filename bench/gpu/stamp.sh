#!/usr/bin/env bash
# One hash of the sources the ghostfim wheel is built from (no git needed: the GPU machine gets a
# plain copy of the tree). prepare.sh stores it; run.sh compares before trusting the wheel.
set -euo pipefail
cd "$(dirname "$0")/../.."
find engine lsp bench -name '*.py' -not -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum | cat - <(sha256sum pyproject.toml) | sha256sum | cut -d' ' -f1
