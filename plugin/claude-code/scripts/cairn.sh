#!/bin/sh
# Runs the installed `cairn` binary (`cargo install --path crates/cairn-cli`, or CAIRN_BIN).
# For a hook, a missing binary is not the agent's problem: exit 0 and say nothing.
bin="${CAIRN_BIN:-}"
if [ -z "$bin" ]; then
    bin="$(command -v cairn 2>/dev/null)"
fi
if [ -z "$bin" ] && [ -x "$HOME/.cargo/bin/cairn" ]; then
    bin="$HOME/.cargo/bin/cairn"
fi
if [ -z "$bin" ]; then
    if [ "$1" = "hook" ]; then
        cat >/dev/null
        exit 0
    fi
    echo "cairn: the cairn binary is not installed (cargo install --path crates/cairn-cli)" >&2
    exit 1
fi
exec "$bin" "$@"
