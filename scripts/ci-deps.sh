#!/usr/bin/env bash
# Installs test dependencies that are not Go modules, so that nothing is
# downloaded at test time. `make test` runs it first. Idempotent and quick when
# everything is present (it checks before it installs); safe on a developer
# machine (it asks sudo only when it must install a Debian package).
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi

# Debian packages: Chromium (browser tests), Node.js and npm (browser and
# TypeScript MCP client tests), systemd-analyze (deploy unit checks),
# script(1) (termctl on a terminal), openssl (offline key check),
# systemd-nspawn, debootstrap and curl (the shipped units under a booted systemd).
need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
command -v script >/dev/null 2>&1 || need_apt+=(bsdutils)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# A real systemd booted in a container (deploy's systemd-nspawn test), and
# curl to reach its gateway.
command -v systemd-nspawn >/dev/null 2>&1 || need_apt+=(systemd-container)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# python3: the dev server (http.server) and egress probe of the gateway and browser tests.
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# ip (iproute2) and nsenter (util-linux): the fleet test's hosts in network
# namespaces on veth links (a slim Debian image has no iproute2).
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v nsenter >/dev/null 2>&1 || need_apt+=(util-linux)
if [ ${#need_apt[@]} -gt 0 ]; then
	echo "ci-deps: installing ${need_apt[*]} (apt)"
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# npm packages used by the browser, MCP TypeScript-client, MCP conformance-suite
# and Inspector-CLI tests (the last two on Node.js 22 from the npm registry; lockfiles
# committed). npm records what it installed in node_modules/.package-lock.json;
# when that is newer than the lockfile, the install is current.
for d in web/e2e mcpbridge/tsclient mcpbridge/conformance gateway/openapilint; do
	[ -f "$d/package.json" ] || continue
	if [ -f "$d/node_modules/.package-lock.json" ] && [ "$d/node_modules/.package-lock.json" -nt "$d/package-lock.json" ]; then
		continue
	fi
	echo "ci-deps: npm ci in $d"
	(cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
done
# The test OpenTelemetry Collector (tools/otelcol, its own module so the
# product does not depend on the collector): built here, once per change of
# its go.mod/go.sum/main.go, and cached in the build directory (bin/otelcol,
# where make test looks), so the export tests find it ready (a cold build
# takes minutes).
if ! bin=$(TERMD_OTELCOL_CACHE="$(pwd)/bin/otelcol" go run ./internal/harness/buildotelcol); then
	echo "ci-deps: cannot build the test collector (tools/otelcol): its Go modules come from the Go module proxy" >&2
	exit 1
fi
echo "ci-deps: test collector $bin"
echo "ci-deps: test dependencies are present"
