#!/usr/bin/env bash
# Installs what the tests need beyond setup.sh: Debian's chromium (driven by
# playwright-core; no browser download), poppler-utils (PDF pages to pixels),
# and the browser test's node packages. Idempotent.
source "$(dirname "$0")/lib.sh"

say "test dependencies"
apt_install chromium poppler-utils fonts-dejavu-core fonts-wqy-zenhei
command -v node >/dev/null || apt_install nodejs npm
stamp=kernel/browsertest/node_modules/.lock.sha256
want=$(sha256sum kernel/browsertest/package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  (cd kernel/browsertest && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null)"

# The reference MCP client SDK, pinned, for the MCP server's test (kernel/mcp).
mstamp=.venv-mcp/.requirements.sha256
mwant=$(sha256sum kernel/mcp/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$mstamp" 2>/dev/null)" != "$mwant" ]; then
  say "MCP client virtualenv .venv-mcp (kernel/mcp/requirements.txt)"
  rm -rf .venv-mcp
  python3 -m venv .venv-mcp
  .venv-mcp/bin/pip install -q --disable-pip-version-check --no-cache-dir -r kernel/mcp/requirements.txt
  echo "$mwant" > "$mstamp"
fi
