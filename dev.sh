#!/usr/bin/env bash
# The two commands a fresh machine needs, each setting itself up first:
#   bash dev.sh start   runs the example server on the in-memory store
#   bash dev.sh test    runs every test suite (Redis and PostgreSQL suites start their own servers; the dashboard's
#                       browser tests run Debian's Chromium, installed here when missing)
# and `bash dev.sh setup`, which only installs (CI runs it before its checks); `bash dev.sh registry`, which
# serves sluice's packages from a local npm registry for teams that want them before they are on npm's;
# `bash dev.sh build`, which builds what is stale; and `bash dev.sh node [LINE]`, which installs Node LINE
# (the active LTS line by default) into .node/ and prints its bin folder.
set -euo pipefail
cd "$(dirname "$0")"

PNPM_VERSION=10.34.8
# The Node lines sluice supports (package.json's engines: >=22): 22 and 24 (maintenance LTS) and 26 (active
# LTS, the line the bench's published figures are taken on, and the one installed when this machine's Node is
# older than 22).
NODE_LTS=26

# Installs Node LINE from the npm registry (the node-linux-<arch> package holds the official binary) into
# .node/LINE, once, and prints its bin folder.
node_line() {
  local line=$1 dir="$PWD/.node/$1" arch
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "No Node binary package for $(uname -m): install Node $line yourself." >&2; exit 1 ;;
  esac
  if [ ! -x "$dir/bin/node" ]; then
    echo "Installing Node $line from the npm registry (node-linux-$arch@$line) into .node/$line..." >&2
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "node-linux-$arch@$line" >/dev/null)
    mkdir -p "$dir"
    tar -xzf "$tmp"/node-linux-*.tgz -C "$dir" --strip-components=1 package/bin/node package/LICENSE
    rm -rf "$tmp"
  fi
  echo "$dir/bin"
}

# Puts a supported Node first on PATH: this machine's when it is 22 or later, else the active LTS line.
ensure_node() {
  local major
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -lt 22 ]; then
    PATH="$(node_line "$NODE_LTS"):$PATH"
    export PATH
    hash -r
  fi
}

ensure_pnpm() {
  if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
    npm install --global --force "pnpm@$PNPM_VERSION" >/dev/null
    hash -r
  fi
  pnpm install --frozen-lockfile --reporter=silent
}

# The PostgreSQL suites initdb their own servers on free ports; they need only the server's binaries. No
# machine cluster is created on 5432 by the install: the suites never use one.
ensure_postgres() {
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "Installing the PostgreSQL server with apt-get (the PostgreSQL suites start their own servers)..."
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.d/sluice.conf >/dev/null
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
  fi
}

ensure_redis() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "Installing redis-server with apt-get (the Redis suites start their own servers)..."
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
}

# Builds the packages when an input of a build (a source, the manifest, the compiler and bundler settings,
# its own or the shared ones) is newer than that build, printing the build's output only if it fails.
build_if_stale() {
  local stale=""
  local built
  for dir in packages/*/; do
    # A package's build: its library entry (dist/index.js), or its command alone (@sluice/cli's dist/main.js).
    built="${dir}dist/index.js"
    [ -f "$built" ] || built="${dir}dist/main.js"
    [ -f "$built" ] || { stale=1; break; }
    # The dashboard also builds its page (page/, with core's rule grammar bundled: tsup.page.config.ts).
    if [ -n "$(find "${dir}src" "${dir}package.json" "${dir}tsconfig.json" "${dir}tsup.config.ts" \
      "${dir}tsup.page.config.ts" "${dir}page" \
      tsup.base.ts tsconfig.base.json -newer "$built" -print -quit 2>/dev/null)" ]; then
      stale=1; break
    fi
  done
  [ -n "$stale" ] || return 0
  echo "Building the packages..."
  local log
  log=$(mktemp)
  if ! pnpm -s build >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
  rm -f "$log"
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

# Every suite, one file at a time: first most of them, then the few that load the machine themselves
# (vitest.config.ts names them). Both parts always run; the command fails when either did.
run_tests() {
  local status=0
  pnpm exec vitest run || status=1
  SLUICE_TESTS=serial pnpm exec vitest run || status=1
  return $status
}

case "${1:-}" in
  start) ensure_node; ensure_pnpm; build_if_stale; exec node examples/express/server.mjs ;;
  test) ensure_node; ensure_pnpm; ensure_redis; ensure_postgres; ensure_chromium; build_if_stale; run_tests ;;
  setup) ensure_node; ensure_pnpm; ensure_redis; ensure_postgres; ensure_chromium ;;
  build) build_if_stale ;;
  node) node_line "${2:-$NODE_LTS}" ;;
  registry) ensure_node; ensure_pnpm; exec node scripts/registry.mjs "${@:2}" ;;
  *) echo "usage: bash dev.sh start|test|setup|registry|build|node [LINE]" >&2; exit 2 ;;
esac
