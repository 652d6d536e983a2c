#!/usr/bin/env bash
# Installs test dependencies that are not Go modules: nothing is downloaded at
# test time. Idempotent; safe to run on a developer machine.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ] && [ -d web/e2e ]; then
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# npm packages used by the browser and MCP TypeScript-client tests (lockfiles committed).
for d in web/e2e mcpbridge/tsclient; do
	if [ -f "$d/package.json" ]; then
		(cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
	fi
done

# --- deploy tests: `systemd-analyze verify` on the shipped units (deploy/deploy_test.go skips without it).
if ! command -v systemd-analyze >/dev/null 2>&1; then
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
