# The real coding agents the tests run (sourced by scripts/test): pinned npm packages,
# installed once into a cache outside the checkout. A version bump is one line here.
# Each agent's binary ends up at $MEMQ_AGENTS_DIR/<name>/node_modules/.bin/<bin>.
MEMQ_AGENT_PACKAGES=(
  "claude-code @anthropic-ai/claude-code@2.1.328"
  "codex @openai/codex@0.169.0"
  "gemini @google/gemini-cli@0.61.0"
  "opencode opencode-ai@1.18.33"
)
export MEMQ_AGENTS_DIR="${MEMQ_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memq/agents}"
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "memq: installing Debian's npm for the real-agent tests" >&2
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm >/dev/null
  else
    echo "memq: the real-agent tests need npm (apt-get install npm)" >&2
  fi
fi
# OpenCode's grep and glob tools run ripgrep from the PATH; without it they download it.
if ! command -v rg >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "memq: installing Debian's ripgrep for the OpenCode tests" >&2
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q ripgrep >/dev/null
  else
    echo "memq: the OpenCode tests need ripgrep (apt-get install ripgrep)" >&2
  fi
fi
for entry in "${MEMQ_AGENT_PACKAGES[@]}"; do
  name="${entry%% *}"; spec="${entry#* }"
  dir="$MEMQ_AGENTS_DIR/$name"
  if [ "$(cat "$dir/.memq-spec" 2>/dev/null)" != "$spec" ]; then
    echo "memq: installing $spec for the real-agent tests" >&2
    rm -rf "$dir"; mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$spec" >/dev/null
    echo "$spec" > "$dir/.memq-spec"
  fi
done
