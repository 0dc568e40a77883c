# Install NVIDIA OSMO's own CLI (../shared/osmo-cli) into .venv-osmo for the wire-compatibility
# tests (sourced by scripts/test). Its code is not copied into corral: it is run from where it
# lies. It needs Python 3.12 or newer; the machine's is found on PATH or under pyenv.
# Exports CORRAL_OSMO_CLI (its folder) and CORRAL_OSMO_PYTHON (the venv's python).

find_osmo_cli() {
  local candidate
  for candidate in "${CORRAL_OSMO_CLI:-}" "$PWD/../shared/osmo-cli" /work/shared/osmo-cli; do
    if [ -n "$candidate" ] && [ -f "$candidate/requirements.txt" ] && [ -d "$candidate/src/cli" ]; then
      (cd "$candidate" && pwd)
      return
    fi
  done
}

find_python_312() {
  local candidate
  for candidate in python3.13 python3.12 python3 \
    $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
}

setup_osmo_cli() {
  local cli python stamp
  cli=$(find_osmo_cli)
  if [ -z "$cli" ]; then
    echo "== OSMO's CLI not found (set CORRAL_OSMO_CLI to its folder): its tests will be skipped" >&2
    return
  fi
  python=$(find_python_312)
  if [ -z "$python" ]; then
    echo "== no Python 3.12 or newer for OSMO's CLI: its tests will be skipped" >&2
    return
  fi
  stamp=".venv-osmo/.requirements-$(sha256sum "$cli/requirements.txt" | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    echo "== installing OSMO's CLI requirements into .venv-osmo ($("$python" --version))"
    rm -rf .venv-osmo
    "$python" -m venv .venv-osmo
    .venv-osmo/bin/python -m pip install --quiet --upgrade pip
    .venv-osmo/bin/python -m pip install --quiet -r "$cli/requirements.txt"
    touch "$stamp"
  fi
  export CORRAL_OSMO_CLI="$cli" CORRAL_OSMO_PYTHON="$PWD/.venv-osmo/bin/python"
  export CORRAL_REQUIRE_OSMO_CLI=1
}
