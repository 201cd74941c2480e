#!/usr/bin/env bash
# Minimal install: the core package alone (no `server`, `postgres`, `memory` or `test`
# extras), in a fresh virtualenv, runs a workflow with the CLI on the embedded SQLite store,
# and prints the install's size (`du -sm` of the virtualenv).
#
#   scripts/check-minimal-install.sh            # exit 0 when it works
#
# Uses python3 from PATH (override with PYTHON=...); pip's own configuration decides where
# packages come from.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/wovyr-minimal.XXXXXX")"
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check .

# The extras must really be absent, or this check proves nothing.
for module in psycopg psycopg_pool fastapi uvicorn jinja2 pytest mcp opentelemetry numpy; do
  if "$work/venv/bin/python" -c "import $module" 2>/dev/null; then
    echo "check-minimal-install: '$module' is installed without its extra" >&2
    exit 1
  fi
done

status=0
WOVYR_HOME="$work/home" "$work/venv/bin/wovyr" run examples/hello.yaml -i name=minimal \
  >"$work/out.txt" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  cat "$work/out.txt" >&2
  echo "check-minimal-install: 'wovyr run examples/hello.yaml' exited $status" >&2
  exit 1
fi
if ! grep -q "completed" "$work/out.txt"; then
  cat "$work/out.txt" >&2
  echo "check-minimal-install: the run did not report 'completed'" >&2
  exit 1
fi
# Tracing asked for without its extra: refused at start, saying what to install.
status=0
WOVYR_HOME="$work/home" WOVYR_OTEL=1 "$work/venv/bin/wovyr" run examples/hello.yaml \
  -i name=minimal >"$work/otel.txt" 2>&1 || status=$?
if [ "$status" -eq 0 ] || ! grep -q "wovyr\[otel\]" "$work/otel.txt"; then
  cat "$work/otel.txt" >&2
  echo "check-minimal-install: WOVYR_OTEL=1 without the otel extra was not refused" >&2
  exit 1
fi
echo "check-minimal-install: ok (core install of $(du -sm "$work/venv" | cut -f1) MB ran examples/hello.yaml)"
