#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what the tests need, then checks formatting,
# lints and runs every test with nextest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# On CI the PostgreSQL tests must not skip: naming the server makes a missing one fail them.
if [ -n "${CI:-}" ] && [ -z "${CAIRN_TEST_PG_URL:-}" ]; then
    export CAIRN_TEST_PG_URL="postgres://postgres@127.0.0.1:5432/postgres"
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo nextest"
cargo nextest run --workspace --locked --no-fail-fast
