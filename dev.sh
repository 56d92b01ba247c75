#!/usr/bin/env bash
# The two commands a fresh machine needs, each setting itself up first:
#   bash dev.sh start   runs the example server on the in-memory store
#   bash dev.sh test    runs every test suite (Redis suites start their own redis-server; the dashboard's
#                       browser tests run Debian's Chromium, installed here when missing)
# and `bash dev.sh setup`, which only installs (CI runs it before its checks).
set -euo pipefail
cd "$(dirname "$0")"

PNPM_VERSION=10.34.8

ensure_pnpm() {
  if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
    npm install --global --force "pnpm@$PNPM_VERSION" >/dev/null
    hash -r
  fi
  pnpm install --frozen-lockfile --reporter=silent
}

ensure_redis() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "Installing redis-server with apt-get (the Redis suites start their own servers)..."
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
}

# The dashboard's browser tests drive Debian's Chromium (never a browser downloaded by a test tool); without
# it they fail rather than skip.
ensure_chromium() {
  if [ ! -x /usr/bin/chromium ]; then
    echo "Installing chromium with apt-get (the dashboard's browser tests run it headless)..."
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
}

case "${1:-}" in
  start) ensure_pnpm; pnpm start ;;
  test) ensure_pnpm; ensure_redis; ensure_chromium; pnpm test ;;
  setup) ensure_pnpm; ensure_redis; ensure_chromium ;;
  *) echo "usage: bash dev.sh start|test|setup" >&2; exit 2 ;;
esac
