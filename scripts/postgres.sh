# Start a throw-away PostgreSQL for the tests (sourced by scripts/test).
# Exports CORRAL_TEST_POSTGRES_URL; the server is stopped and removed when the shell exits.

start_postgres() {
  if [ -n "${CORRAL_TEST_POSTGRES_URL:-}" ]; then
    echo "== PostgreSQL: using CORRAL_TEST_POSTGRES_URL as given"
    return
  fi
  local bin
  bin=$(dirname "$(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | tail -1)")
  if [ ! -x "$bin/pg_ctl" ]; then
    echo "== PostgreSQL is not installed (no pg_ctl): PostgreSQL tests will be skipped" >&2
    return
  fi
  PG_DIR=$(mktemp -d /tmp/corral-pg.XXXXXX)
  PG_PORT=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local run=()
  if [ "$(id -u)" = 0 ]; then
    # PostgreSQL refuses to run as root: run it as the postgres user.
    chown postgres "$PG_DIR"
    run=(runuser -u postgres --)
  fi
  "${run[@]}" "$bin/initdb" -D "$PG_DIR/data" -A trust -U postgres >"$PG_DIR/initdb.log" 2>&1
  "${run[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off" \
    start >/dev/null
  export CORRAL_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$PG_PORT/postgres"
  PG_RUN=("${run[@]}")
  PG_BIN=$bin
  trap stop_postgres EXIT
  echo "== PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on port $PG_PORT"
}

stop_postgres() {
  "${PG_RUN[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
}
