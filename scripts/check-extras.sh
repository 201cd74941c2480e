#!/usr/bin/env bash
# The extras matrix: the core install alone, each extra alone (postgres, server, mcp, otel,
# memory) and all of them together (the `all` extra), each in a virtualenv holding only what it declares (and the
# test runner: pytest, pytest-timeout, hypothesis), each running the tests of what it
# enables. A feature that needs a package its install does not declare fails here, where
# the development install (every extra at once) would have hidden it.
#
#   scripts/check-extras.sh              # every install of the matrix; exit 0 when all pass
#   scripts/check-extras.sh server mcp   # only these (core, postgres, server, mcp, otel,
#                                        # memory, all)
#
# Time is kept small: every wheel is resolved once into a wheelhouse (through pip's cache);
# the core install is made from it without an index, by one pip into an environment that
# has none of its own, and each other install is a copy of it with its extra added; the
# installs run JOBS at a time (default 2), each with a focused selection of tests.
# Uses python3 from PATH (override with PYTHON=...). The PostgreSQL tests need the server
# CI starts (tests/conftest.py, WOVYR_TEST_POSTGRES_URL).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
jobs="${JOBS:-2}"
work="$(mktemp -d "${TMPDIR:-/tmp}/wovyr-extras.XXXXXX")"
trap 'rm -rf "$work"' EXIT

RUNNER=("pytest>=8" "pytest-timeout>=2.3" "hypothesis>=6.100")
declare -A EXTRAS=([core]="" [postgres]="postgres" [server]="server" [mcp]="mcp" [otel]="otel"
  [memory]="memory" [all]="all")
# The module of each extra that no other install brings (mcp's SDK brings uvicorn and
# starlette): present without its extra, the install is not what it claims to be.
declare -A MODULE=([postgres]=psycopg [server]=fastapi [mcp]=mcp [otel]=opentelemetry.sdk
  [memory]=numpy)
# The tests of what each install enables; the marks keep to what runs without the others.
declare -A TESTS=(
  [core]="tests/unit/definition/test_validate.py tests/unit/definition/test_parse.py
    tests/unit/engine/test_deferred.py tests/integration/test_engine_flows.py
    tests/acceptance/test_cli.py::test_run_completes_with_exit_0
    tests/acceptance/test_cli.py::test_failed_saga_exits_1_and_compensates
    tests/unit/cli/test_cli_memory.py::test_search_without_numpy_names_the_memory_extra
    tests/integration/test_testing_mcp_server.py::test_without_the_mcp_sdk_the_server_names_the_extra
    tests/integration/test_testing_mcp_server.py::test_the_kit_and_its_plugin_do_not_import_the_mcp_sdk"
  [postgres]="tests/contract/test_store_flow_gates.py tests/contract/test_flow_holds.py"
  [server]="tests/server/test_workflows_api.py tests/server/test_secrets_api.py"
  [mcp]="tests/integration/test_mcp_client.py tests/integration/test_testing_mcp_server.py"
  [otel]="tests/unit/test_traces.py tests/integration/test_tracing.py"
  [memory]="tests/unit/cli/test_cli_memory.py tests/integration/test_memory_activity.py"
  [all]="tests/server/test_mcp_server.py tests/server/test_tracing_api.py
    tests/integration/test_tracing_calls.py"
)
declare -A MARKS=([postgres]="postgres and not slow" [all]="not slow")
NOT_PG="not postgres and not slow"

installs=("$@")
((${#installs[@]})) || installs=(core postgres server mcp otel memory all)

"$python" -m venv "$work/pip"
pip=("$work/pip/bin/pip" -q --disable-pip-version-check)
started=$SECONDS
"${pip[@]}" wheel -w "$work/wheels" ".[all]" "${RUNNER[@]}"
"$python" -m venv --without-pip "$work/core"
"${pip[@]}" --python "$work/core/bin/python" install --no-index --find-links "$work/wheels" \
  wovyr "${RUNNER[@]}"
echo "check-extras: wheelhouse and the core install in $((SECONDS - started)) s"

check() {  # one install: made, checked for what it must not have, its tests run
  local name="$1" extras="${EXTRAS[$1]}" env="$work/env-$1" started=$SECONDS
  cp -a "$work/core" "$env"
  if [[ -n "$extras" ]]; then
    "${pip[@]}" --python "$env/bin/python" install --no-index --find-links "$work/wheels" \
      "wovyr[$extras]"
  fi
  for extra in "${!MODULE[@]}"; do
    [[ ",$extras," == *",$extra,"* || "$extras" == all ]] && continue
    if "$env/bin/python" -c "import ${MODULE[$extra]}" 2>/dev/null; then
      echo "check-extras: ${MODULE[$extra]} is installed in '$name' without the $extra extra"
      return 1
    fi
  done
  # Each install's tests have a temporary folder of their own: two sessions at once under
  # pytest's shared one each clear the other's old folders as they end, and pytest's own
  # scan of that folder was then left open (a ResourceWarning, an error here).
  # shellcheck disable=SC2086  # the selection is a list of test paths
  "$env/bin/python" -m pytest -q -p no:cacheprovider -m "${MARKS[$name]:-$NOT_PG}" \
    --basetemp "$work/tmp-$name" ${TESTS[$name]} || return 1
  echo "check-extras: $name (${extras:-core only}) in $((SECONDS - started)) s"
}

declare -A running=()
failed=()
collect() {  # wait for one install to end; print its log
  local pid name status=0
  wait -n -p pid || status=$?
  for name in "${!running[@]}"; do
    [[ "${running[$name]}" == "$pid" ]] || continue
    unset "running[$name]"
    ((status == 0)) || failed+=("$name")
    cat "$work/$name.log"
  done
}
for name in "${installs[@]}"; do
  while ((${#running[@]} >= jobs)); do collect; done
  check "$name" >"$work/$name.log" 2>&1 &
  running[$name]=$!
done
while ((${#running[@]})); do collect; done
if ((${#failed[@]})); then
  echo "check-extras: failed: ${failed[*]}" >&2
  exit 1
fi
echo "check-extras: ok (${installs[*]})"
