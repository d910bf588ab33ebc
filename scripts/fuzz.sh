#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of outside input (docs/fuzzing.md).
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [TARGET...]
#
# Builds the libFuzzer targets in fuzz/ (installing cargo-fuzz from crates.io when it is
# missing) and runs each named target (default: all) for N seconds (default 60), J targets at a
# time (default 1). Exits non-zero when any target crashes or breaks an invariant; the input
# that did is kept in fuzz/artifacts/<target>/ and the run's log in fuzz/logs/<target>.log.
#
# The machine has one stable toolchain: RUSTC_BOOTSTRAP=1 lets it take the -Z flags cargo-fuzz
# passes. The sanitizer is `none` by default (coverage-guided, no AddressSanitizer: cairn has no
# unsafe code of its own); FUZZ_SANITIZER=address asks for ASan where its runtime is installed.
# New inputs the fuzzer finds go to fuzz/work/<target>/ (not committed); the committed seeds in
# fuzz/corpus/<target>/ are only read. Builds go to $CARGO_TARGET_DIR/fuzz, or fuzz/target, so
# they never invalidate the ordinary build.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=1
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
        --seconds=*) seconds="${1#--seconds=}"; shift ;;
        --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
        --jobs=*) jobs="${1#--jobs=}"; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: --seconds takes a whole number, not '$seconds'" >&2; exit 2 ;; esac
case "$jobs" in ''|*[!0-9]*|0) echo "fuzz.sh: --jobs takes a number from 1, not '$jobs'" >&2; exit 2 ;; esac

all_targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^cairn-fuzz-targets$')
if [ ${#targets[@]} -eq 0 ]; then
    read -r -a targets <<< "$(echo $all_targets)"
fi
for target in "${targets[@]}"; do
    if ! grep -qx "$target" <<< "$all_targets"; then
        echo "fuzz.sh: no target '$target'; the targets are: $(echo $all_targets)" >&2
        exit 2
    fi
done

if ! command -v c++ >/dev/null 2>&1; then
    echo "fuzz.sh: libFuzzer needs a C++ compiler: apt-get install -y g++" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz (crates.io)"
    (unset CARGO_TARGET_DIR; cargo install cargo-fuzz --locked)
fi

export RUSTC_BOOTSTRAP=1
sanitizer="${FUZZ_SANITIZER:-none}"
target_dir="${CARGO_TARGET_DIR:-$PWD/fuzz/target}"
[ -n "${CARGO_TARGET_DIR:-}" ] && target_dir="$CARGO_TARGET_DIR/fuzz"
flags=(--sanitizer "$sanitizer" --debug-assertions --target-dir "$target_dir")

echo "== building ${#targets[@]} fuzz target(s) (sanitizer: $sanitizer)"
for target in "${targets[@]}"; do
    cargo fuzz build "${flags[@]}" "$target"
done

mkdir -p fuzz/logs
run_one() {
    local target="$1"
    mkdir -p "fuzz/work/$target" "fuzz/artifacts/$target"
    # The engine-level targets make their brains under TMPDIR: memory is faster than disk.
    local tmp="${TMPDIR:-/tmp}"
    [ -d /dev/shm ] && [ -w /dev/shm ] && tmp=/dev/shm
    if TMPDIR="$tmp" cargo fuzz run "${flags[@]}" "$target" "fuzz/work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 >"fuzz/logs/$target.log" 2>&1; then
        echo ok > "fuzz/logs/$target.status"
    else
        echo crash > "fuzz/logs/$target.status"
    fi
}

echo "== fuzzing each target for ${seconds}s, $jobs at a time"
running=0
for target in "${targets[@]}"; do
    rm -f "fuzz/logs/$target.status"
    run_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true

failed=0
printf '%-16s %8s %12s %10s %8s %8s  %s\n' target result executions exec/s cov ft corpus
for target in "${targets[@]}"; do
    log="fuzz/logs/$target.log"
    result=$(cat "fuzz/logs/$target.status" 2>/dev/null || echo crash)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
    cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<< "$last")
    ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<< "$last")
    corpus=$(sed -n 's/.*corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<< "$last")
    printf '%-16s %8s %12s %10s %8s %8s  %s\n' "$target" "$result" "${runs:--}" "${speed:--}" \
        "${cov:--}" "${ft:--}" "${corpus:--}"
    if [ "$result" != ok ]; then
        failed=1
        echo "   $target failed; its log: $log; the input: $(ls fuzz/artifacts/"$target"/* 2>/dev/null | tr '\n' ' ')"
        grep -m1 -E "panicked at|ERROR: libFuzzer" -A3 "$log" | sed 's/^/   /' || true
    fi
done
if [ "$failed" -ne 0 ]; then
    echo "fuzz.sh: a target failed. Fix it, copy the input into fuzz/regressions/<target>/ (the" >&2
    echo "ordinary suite replays it: cargo nextest run -p cairn-fuzz), and run again." >&2
    exit 1
fi
echo "fuzz.sh: no crash in ${#targets[@]} target(s)"
