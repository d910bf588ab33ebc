#!/usr/bin/env bash
# Installs what the web UI's browser tests need (crates/cairn-cli/tests/ui_browser.rs):
# Debian's Chromium and, from the npm registry, the exact playwright-core and axe-core of
# crates/cairn-cli/tests/ui-browser/package-lock.json. Idempotent: quick when both are there.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
    echo "== installing Debian's chromium (the web UI's browser tests)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi
if ! command -v node >/dev/null 2>&1; then
    echo "== installing node and npm (the web UI's browser tests)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >/dev/null
fi
dir=crates/cairn-cli/tests/ui-browser
if [ ! -f "$dir/node_modules/playwright-core/package.json" ] \
    || [ ! -f "$dir/node_modules/axe-core/axe.min.js" ] \
    || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "== installing playwright-core and axe-core into $dir/node_modules"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
