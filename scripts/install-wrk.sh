#!/usr/bin/env bash
# Installs wrk (the HTTP load generator `cairn-bench serve` drives) from the distribution's
# packages when it is missing. Idempotent.
set -euo pipefail
if command -v wrk >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "wrk is not installed and there is no apt-get here: install wrk (https://github.com/wg/wrk) and run again" >&2
    exit 1
fi
echo "== installing wrk (the HTTP load generator of cairn-bench serve)" >&2
(apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
command -v wrk >/dev/null
