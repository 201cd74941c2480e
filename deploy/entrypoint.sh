#!/bin/sh
# The container image's entry point (also usable on a host):
#
#   entrypoint.sh serve [wovyr serve options]     the API, web UI and its worker (default)
#   entrypoint.sh worker [wovyr worker options]   a worker, its probes and metrics on :9464
#   entrypoint.sh db-upgrade                      apply the store's migrations, then exit
#   entrypoint.sh healthcheck                     exit 0 when $WOVYR_HEALTHCHECK_URL is ready
#   entrypoint.sh wovyr ARGS...                   any wovyr command
#   entrypoint.sh COMMAND ARGS...                 any other program (a shell, say)
#
# WOVYR_HOME defaults to /data (the image's volume). Set WOVYR_DB_UPGRADE=1 to apply the
# migrations before `serve` or `worker` start (one process of a stack should do it: the
# compose file runs `db-upgrade` once before the others instead).
set -eu

: "${WOVYR_HOME:=/data}"
export WOVYR_HOME

command="${1:-serve}"
[ "$#" -gt 0 ] && shift

upgrade_first() {
  if [ "${WOVYR_DB_UPGRADE:-0}" = 1 ]; then
    wovyr db upgrade
  fi
}

case "$command" in
  serve)
    upgrade_first
    exec wovyr serve "$@"
    ;;
  worker)
    upgrade_first
    # the probes and metrics listen inside the container: publish or scrape them privately
    : "${WOVYR_METRICS_ADDR:=0.0.0.0:9464}"
    export WOVYR_METRICS_ADDR
    exec wovyr worker "$@"
    ;;
  db-upgrade)
    exec wovyr db upgrade "$@"
    ;;
  healthcheck)
    # no curl in the image: Python's standard library asks, and a 503 is a failure
    url="${WOVYR_HEALTHCHECK_URL:-http://127.0.0.1:${WOVYR_PORT:-8080}/readyz}"
    exec python3 -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=4).read()' "$url"
    ;;
  wovyr)
    exec wovyr "$@"
    ;;
  *)
    exec "$command" "$@"
    ;;
esac
