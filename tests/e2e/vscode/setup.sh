#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, outside the repository and cached, so that a
# second run installs nothing:
#   - Node 24 from npm's node-linux-<arch> package (code-server 4.139 wants Node 24 exactly; the
#     package carries the binary and the headers node-gyp builds code-server's native modules with);
#   - code-server, VS Code served to a browser, built with that Node;
#   - Playwright for Python in a virtual environment of its own (it never downloads a browser:
#     the test drives Debian's Chromium);
#   - Debian's chromium, and libkrb5-dev for code-server's kerberos module (apt, as root).
# Prints `NAME=value` lines for run.sh on stdout; progress goes to stderr.
set -euo pipefail

CACHE="${GHOSTFIM_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ghostfim/e2e}"
NODE_VERSION="${GHOSTFIM_E2E_NODE_VERSION:-24.22.3}"
CODE_SERVER_VERSION="${GHOSTFIM_E2E_CODE_SERVER_VERSION:-4.139.1}"
PLAYWRIGHT_VERSION="${GHOSTFIM_E2E_PLAYWRIGHT_VERSION:-1.65.2}"
PYTHON="${PYTHON:-python3}"
CHROMIUM="${GHOSTFIM_E2E_CHROMIUM:-/usr/bin/chromium}"

say() { echo "e2e setup: $*" >&2; }

case "$(uname -m)" in
  x86_64 | amd64) NODE_ARCH=x64 ;;
  aarch64 | arm64) NODE_ARCH=arm64 ;;
  *) say "no node-linux package for $(uname -m)"; exit 1 ;;
esac

mkdir -p "$CACHE"

# --- Debian packages -------------------------------------------------------------------------
apt_missing=()
[ -x "$CHROMIUM" ] || apt_missing+=(chromium)
[ -e /usr/include/gssapi/gssapi.h ] || apt_missing+=(libkrb5-dev)
command -v g++ > /dev/null || apt_missing+=(g++)
command -v make > /dev/null || apt_missing+=(make)
if [ "${#apt_missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    sudo=()
  elif command -v sudo > /dev/null && sudo -n true 2> /dev/null; then
    sudo=(sudo -n)
  else
    say "needs Debian packages ${apt_missing[*]}: run 'sudo apt-get install ${apt_missing[*]}' first"
    exit 1
  fi
  say "apt-get install ${apt_missing[*]}"
  "${sudo[@]}" apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
    "${apt_missing[@]}" >&2
fi

# --- Node 24 ---------------------------------------------------------------------------------
NODE_HOME="$CACHE/node-$NODE_VERSION"
NODE_DIR="$NODE_HOME/node_modules/node-linux-$NODE_ARCH"
if [ ! -x "$NODE_DIR/bin/node" ]; then
  say "installing node-linux-$NODE_ARCH@$NODE_VERSION from npm"
  tmp="$(mktemp -d "$CACHE/.node.XXXXXX")"
  npm install --no-audit --no-fund --loglevel=error --prefix "$tmp" \
    "node-linux-$NODE_ARCH@$NODE_VERSION" >&2
  rm -rf "$NODE_HOME"
  mv "$tmp" "$NODE_HOME"
fi
"$NODE_DIR/bin/node" --version > /dev/null

# --- code-server -----------------------------------------------------------------------------
CS_HOME="$CACHE/code-server-$CODE_SERVER_VERSION-node-$NODE_VERSION"
CODE_SERVER="$CS_HOME/node_modules/.bin/code-server"
if [ ! -f "$CS_HOME/.installed" ]; then
  say "installing code-server@$CODE_SERVER_VERSION (builds native modules: about a minute or two)"
  tmp="$(mktemp -d "$CACHE/.code-server.XXXXXX")"
  # npm itself runs on Node 24 here, and so do the install scripts and node-gyp; node-gyp takes
  # the headers from the Node package instead of downloading them.
  PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" \
    npm install --no-audit --no-fund --loglevel=error --prefix "$tmp" \
    "code-server@$CODE_SERVER_VERSION" >&2
  # The postinstall script builds VS Code's native modules; a skipped script leaves none.
  if ! find "$tmp/node_modules/code-server/lib/vscode/node_modules" -name '*.node' -path '*build/Release*' \
    | grep -q .; then
    say "code-server's native modules were not built (were install scripts disabled?)"
    exit 1
  fi
  rm -rf "$CS_HOME"
  mv "$tmp" "$CS_HOME"
  touch "$CS_HOME/.installed"
fi

# --- Playwright for Python -------------------------------------------------------------------
PW_VENV="$CACHE/playwright-$PLAYWRIGHT_VERSION"
if [ ! -f "$PW_VENV/.installed" ]; then
  say "installing playwright==$PLAYWRIGHT_VERSION into $PW_VENV"
  rm -rf "$PW_VENV"
  "$PYTHON" -m venv "$PW_VENV"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$PW_VENV/bin/python" -m pip install -q \
    "playwright==$PLAYWRIGHT_VERSION" >&2
  touch "$PW_VENV/.installed"
fi

echo "E2E_NODE_BIN=$NODE_DIR/bin"
echo "E2E_CODE_SERVER=$CODE_SERVER"
echo "E2E_PYTHON=$PW_VENV/bin/python"
echo "E2E_CHROMIUM=$CHROMIUM"
