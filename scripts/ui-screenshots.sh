#!/usr/bin/env bash
# Refreshes the pictures of every web UI page in docs/ui/ (shown in the README and docs/ui.md):
# runs the browser stories (crates/cairn-cli/tests/ui_browser.rs) with CAIRN_UI_SCREENSHOTS set.
# Needs what scripts/setup.sh installs (chromium, node, playwright-core, axe-core).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-browser.sh
rm -f docs/ui/*.png
mkdir -p docs/ui
CAIRN_UI_SCREENSHOTS="$PWD/docs/ui" cargo nextest run --workspace --locked -E 'binary(ui_browser)'
ls docs/ui
