#!/usr/bin/env bash
# Installs the third-party software the interoperability tests talk to (DKIM signing, a DNS
# server, the official webhook signers, croniter, the MCP SDK, two reference MCP servers,
# the LiteLLM proxy and WordLlama's embedding table for tool search), and GitHub's signer
# from npm (@octokit/webhooks-methods) into a virtual environment under the build directory,
# one package at a time. Each package that installs is recorded in installed/NAME; one that
# cannot is recorded in failed/NAME with pip's last words, and its tests are built as ignored (nextest counts them skipped,
# never passed). Re-running is cheap: installed packages are not fetched again.
#   scripts/interop-venv.sh            # venv at $STEWARD_INTEROP_VENV, else
#                                      # ${CARGO_TARGET_DIR:-target}/interop-venv
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${STEWARD_INTEROP_VENV:-${CARGO_TARGET_DIR:-$PWD/target}/interop-venv}
packages=(dkimpy dnspython standardwebhooks stripe croniter mcp mcp-server-time mcp-server-git "litellm[proxy]")
mkdir -p "$venv/installed" "$venv/failed"
if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -m venv "$venv" 2>"$venv/failed/venv"; then
        echo "interop: cannot create a virtual environment at $venv (see $venv/failed/venv)" >&2
        exit 0
    fi
    rm -f "$venv/failed/venv"
fi
for package in "${packages[@]}"; do
    marker=${package%%[*}
    marker=${marker//-/_}
    if [ -e "$venv/installed/$marker" ]; then
        continue
    fi
    if "$venv/bin/pip" install --quiet --disable-pip-version-check "$package" >"$venv/failed/$marker" 2>&1; then
        "$venv/bin/pip" show "${package%%[*}" 2>/dev/null | grep -i '^version' >"$venv/installed/$marker"
        rm -f "$venv/failed/$marker"
        echo "interop: $package $(cut -d' ' -f2 <"$venv/installed/$marker")"
    else
        echo "interop: $package cannot be installed; its tests are skipped (see $venv/failed/$marker)" >&2
    fi
done
# GitHub's own webhook signer, from the npm registry (needs node and npm).
marker=octokit_webhooks_methods
if [ ! -e "$venv/installed/$marker" ]; then
    if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 \
        && npm install --prefix "$venv/npm" --no-audit --no-fund @octokit/webhooks-methods \
            >"$venv/failed/$marker" 2>&1; then
        node -p "require('$venv/npm/node_modules/@octokit/webhooks-methods/package.json').version" \
            >"$venv/installed/$marker"
        rm -f "$venv/failed/$marker"
        echo "interop: @octokit/webhooks-methods $(cat "$venv/installed/$marker")"
    else
        echo "npm or node missing, or the install failed" >>"$venv/failed/$marker"
        echo "interop: @octokit/webhooks-methods cannot be installed; its tests are skipped (see $venv/failed/$marker)" >&2
    fi
fi
# WordLlama's embedding table from PyPI, as scripts/embedding-model/build.sh makes it: the
# model a user configures as tools.search.embedding_model.
marker=wordllama
if [ ! -e "$venv/installed/$marker" ]; then
    if scripts/embedding-model/build.sh "$venv/embedding-model" >"$venv/failed/$marker" 2>&1; then
        echo "0.4.0.post1" >"$venv/installed/$marker"
        rm -f "$venv/failed/$marker"
        echo "interop: wordllama embedding model $(cat "$venv/installed/$marker")"
    else
        echo "interop: the wordllama embedding model cannot be built; its tests are skipped (see $venv/failed/$marker)" >&2
    fi
fi
