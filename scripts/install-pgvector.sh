#!/usr/bin/env bash
# Makes `CREATE EXTENSION vector` (pgvector) available on the local PostgreSQL server, which the
# PostgreSQL tests and `cairn migrate --to postgres://...` need. Idempotent: a quick no-op when
# the extension is already available. Debian bookworm ships no pgvector package, so it is built
# from Debian trixie's source package (kept in a private apt state directory; the system's apt
# sources are untouched) against the server's own pg_config (/work/shared/research/storage.md §6).
set -euo pipefail

PG_URL="${CAIRN_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
if ! command -v psql >/dev/null 2>&1 || ! command -v pg_config >/dev/null 2>&1 && [ ! -d /usr/lib/postgresql ]; then
    echo "== PostgreSQL is not installed: skipping pgvector (the PostgreSQL tests skip themselves" \
         "with a printed reason when no server answers and CAIRN_PG_URL is unset)"
    exit 0
fi
if ! psql "$PG_URL" -Atqc 'SELECT 1' >/dev/null 2>&1; then
    echo "== no PostgreSQL server answers at ${PG_URL%%\?*}: skipping pgvector (start the server and re-run)"
    exit 0
fi
available="$(psql "$PG_URL" -Atqc "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")"
if [ "$available" = "1" ]; then
    exit 0
fi
major="$(psql "$PG_URL" -Atqc 'SHOW server_version_num')"
major="$((major / 10000))"
PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config"
echo "== building pgvector for PostgreSQL $major from Debian trixie's source package (about 20 s)"
export DEBIAN_FRONTEND=noninteractive
if [ ! -x "$PG_CONFIG" ] || [ ! -f "$("$PG_CONFIG" --includedir-server 2>/dev/null)/postgres.h" ] \
    || ! command -v dpkg-source >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "postgresql-server-dev-$major" dpkg-dev build-essential >/dev/null
fi
S="$(mktemp -d /tmp/cairn-aptsrc.XXXXXX)"
trap 'rm -rf "$S"' EXIT
chmod 755 "$S"
mkdir -p "$S/lists/partial" "$S/cache/archives/partial" "$S/src"
echo 'deb-src http://deb.debian.org/debian trixie main' > "$S/sources.list"
APTO=(-o "Dir::Etc::SourceList=$S/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$S/lists" -o "Dir::Cache=$S/cache")
apt-get "${APTO[@]}" update -qq
(cd "$S/src" && apt-get "${APTO[@]}" source --download-only pgvector >/dev/null \
    && dpkg-source -x pgvector_*.dsc pgvector >/dev/null 2>&1)
make -s -C "$S/src/pgvector" -j2 PG_CONFIG="$PG_CONFIG" >/dev/null
make -s -C "$S/src/pgvector" install PG_CONFIG="$PG_CONFIG" >/dev/null
available="$(psql "$PG_URL" -Atqc "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")"
if [ "$available" != "1" ]; then
    echo "pgvector was built but the server at ${PG_URL%%\?*} still does not offer it" >&2
    exit 1
fi
echo "== pgvector $(psql "$PG_URL" -Atqc "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'") installed"
