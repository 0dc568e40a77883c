# Install corral into .venv (sourced by scripts/start and scripts/test). Installing takes about
# a minute the first time; later runs skip it while nothing that decides what is installed
# (pyproject.toml, and which extras) has changed.

ensure_venv() {
  local extras="$1" stamp=.venv/.corral-installed wanted installed
  wanted="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
  installed="$(cat "$stamp" 2>/dev/null || true)"
  # No extras asked for: an install with the test extras serves as well.
  if [ -x .venv/bin/corral ] && { [ "$installed" = "$wanted" ] \
    || { [ -z "$extras" ] && [ "${installed%% *}" = "${wanted%% *}" ]; }; }; then
    return
  fi
  if [ ! -d .venv ]; then
    echo "== creating .venv (a Python virtual environment in this checkout)" >&2
    python3 -m venv .venv
  fi
  echo "== installing corral${extras:+[$extras]} and its dependencies into .venv (the first time takes about a minute)" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}"
  echo "$wanted" > "$stamp"
  echo "== installed" >&2
}
