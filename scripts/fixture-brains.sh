#!/usr/bin/env bash
# Writes the missing fixture brains crates/cairn-cli/tests/fixtures/brain-vN.db, one per schema
# version, with crates/cairn-store/examples/fixture_brains.rs: migrations 1..N applied in order,
# each followed by the rows a binary of that version wrote (in that version's shape).
#
# Existing fixtures are never rewritten. At the next migration (schema v11):
#   1. append `seed_v11` to SEEDS in crates/cairn-store/examples/fixture_brains.rs: rows for
#      whatever v11 adds or changes, written the way the v11 code writes them;
#   2. run this script: it writes brain-v11.db and keeps brain-v1.db … brain-v10.db;
#   3. add brain-v11 to the versions `crates/cairn-cli/tests/fixtures.rs` opens, and commit both.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet -p cairn-store --example fixture_brains -- crates/cairn-cli/tests/fixtures
