# Start the tests' OpenID Connect provider (tests/oidc_provider.py; sourced by scripts/test).
# Exports CORRAL_TEST_OIDC_PROVIDER (its issuer); the provider stops when the shell exits.

start_oidc_provider() {
  if [ -n "${CORRAL_TEST_OIDC_PROVIDER:-}" ]; then
    echo "== OIDC provider: using CORRAL_TEST_OIDC_PROVIDER as given"
    return
  fi
  OIDC_LOG=$(mktemp /tmp/corral-oidc.XXXXXX)
  .venv/bin/python -m tests.oidc_provider >"$OIDC_LOG" 2>&1 &
  OIDC_PID=$!
  local line=""
  for _ in $(seq 100); do
    line=$(head -1 "$OIDC_LOG")
    [ -n "$line" ] && break
    sleep 0.1
  done
  case "$line" in
    "listening on "*) ;;
    *) echo "== the test OIDC provider did not start: $(cat "$OIDC_LOG")" >&2; exit 1 ;;
  esac
  export CORRAL_TEST_OIDC_PROVIDER="${line#listening on }"
  echo "== OIDC provider (tests/oidc_provider.py) at $CORRAL_TEST_OIDC_PROVIDER"
}

stop_oidc_provider() {
  [ -n "${OIDC_PID:-}" ] && kill "$OIDC_PID" 2>/dev/null || true
  rm -f "${OIDC_LOG:-}"
}
