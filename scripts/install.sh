#!/bin/sh
# Installs or uninstalls termd.
#
#   scripts/install.sh PREFIX [BINDIR]        (make install PREFIX=...)
#   scripts/install.sh --uninstall PREFIX     (make uninstall PREFIX=...)
#
# DESTDIR=/stage stages the files under /stage$PREFIX (for packaging): paths
# inside units and the config still say $PREFIX, and no accounts are created.
# TERMD_INSTALL_NO_ACCOUNTS=1 skips creating the termd group and the
# termd-gateway user even as root.
#
# Installs:
#   PREFIX/bin/{termd,termd-launch,termctl,termd-mcp,termd-gateway}  0755
#   PREFIX/lib/systemd/system/{termd.service,termd.socket,termd-operator.socket,termd-gateway.service}  0644
#   PREFIX/share/systemd/user/{termd.service,termd.socket}        0644
#   PREFIX/share/termd/launchd/*.plist                            0644
#   PREFIX/share/doc/termd/{CONFIG.md,OPERATIONS.md}              0644
#   PREFIX/share/man/man1/{termd,termctl,termd-mcp,termd-gateway}*.1  0644
#                                 (from BINDIR/man/man1: make man writes them)
#   PREFIX/etc/termd/                                             0755
#   PREFIX/etc/termd/termd.yaml   (every key, commented; kept if present)  0644
#   PREFIX/etc/termd/policy.yaml  (the embedded default; kept if present)  0644
# Uninstall removes those files and leaves PREFIX/etc/termd and the state
# directory (/var/lib/termd, receipts and keys) in place.
set -eu

usage() { echo "usage: $0 PREFIX [BINDIR] | $0 --uninstall PREFIX" >&2; exit 2; }

uninstall=0
if [ "${1:-}" = "--uninstall" ]; then uninstall=1; shift; fi
[ $# -ge 1 ] || usage
PREFIX=${1%/}
[ -n "$PREFIX" ] || PREFIX=/
BINSRC=${2:-bin}
DESTDIR=${DESTDIR:-}
case "$PREFIX" in /*) ;; *) echo "install.sh: PREFIX must be an absolute path (got $PREFIX)" >&2; exit 2 ;; esac

here=$(cd "$(dirname "$0")/.." && pwd)
root="$DESTDIR$PREFIX"
bins="termd termd-launch termctl termd-mcp termd-gateway"
sysunits="termd.service termd.socket termd-operator.socket termd-gateway.service"
userunits="termd.service termd.socket"
plists="dev.termd.termd.plist dev.termd.termd.user.plist"
docs="CONFIG.md OPERATIONS.md"
is_root=0; [ "$(id -u)" = 0 ] && is_root=1
systemd_running=0
if [ -z "$DESTDIR" ] && [ $is_root = 1 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemd_running=1
fi

if [ $uninstall = 1 ]; then
	if [ $systemd_running = 1 ]; then
		systemctl disable --now termd-gateway.service termd.service termd.socket termd-operator.socket >/dev/null 2>&1 || true
	fi
	for b in $bins; do rm -f "$root/bin/$b"; done
	for u in $sysunits; do rm -f "$root/lib/systemd/system/$u"; done
	for u in $userunits; do rm -f "$root/share/systemd/user/$u"; done
	for p in $plists; do rm -f "$root/share/termd/launchd/$p"; done
	for d in $docs; do rm -f "$root/share/doc/termd/$d"; done
	rm -f "$root"/share/man/man1/termd.1 "$root"/share/man/man1/termd-*.1 "$root"/share/man/man1/termctl.1 "$root"/share/man/man1/termctl-*.1
	rmdir "$root/share/termd/launchd" "$root/share/termd" "$root/share/doc/termd" 2>/dev/null || true
	[ $systemd_running = 1 ] && systemctl daemon-reload || true
	echo "termd uninstalled from $root."
	echo "Kept: configuration in $root/etc/termd and state (receipts, signing keys) in /var/lib/termd"
	echo "      (or ~/.local/state/termd for a user install); remove them yourself if you no longer need them."
	echo "Kept: the termd group and the termd-gateway user, if install.sh created them (groupdel termd; userdel termd-gateway)."
	exit 0
fi

for b in $bins; do
	[ -x "$BINSRC/$b" ] || { echo "install.sh: $BINSRC/$b is missing; run 'make build' first" >&2; exit 1; }
done

# paths rewrites the /usr/local defaults in the shipped units for PREFIX.
paths() {
	sed -e "s#/usr/local/bin/#$PREFIX/bin/#g" -e "s#/usr/local/etc/#$PREFIX/etc/#g" "$1"
}
put() { # put MODE SRC DST: install one file
	mkdir -p "$(dirname "$3")"
	cp "$2" "$3.tmp.$$"
	chmod "$1" "$3.tmp.$$"
	mv -f "$3.tmp.$$" "$3"
}

umask 022
mkdir -p "$root/bin"
for b in $bins; do put 0755 "$BINSRC/$b" "$root/bin/$b"; done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for u in $sysunits; do paths "$here/deploy/systemd/$u" >"$tmp/$u"; put 0644 "$tmp/$u" "$root/lib/systemd/system/$u"; done
for u in $userunits; do paths "$here/deploy/systemd/user/$u" >"$tmp/u-$u"; put 0644 "$tmp/u-$u" "$root/share/systemd/user/$u"; done
for p in $plists; do paths "$here/deploy/launchd/$p" >"$tmp/$p"; put 0644 "$tmp/$p" "$root/share/termd/launchd/$p"; done
for d in $docs; do put 0644 "$here/docs/$d" "$root/share/doc/termd/$d"; done
if [ -d "$BINSRC/man/man1" ]; then
	for m in "$BINSRC"/man/man1/*.1; do put 0644 "$m" "$root/share/man/man1/$(basename "$m")"; done
else
	echo "no man pages in $BINSRC/man/man1 (make man writes them); installing without them"
fi

# Configuration: never overwrite an administrator's files.
mkdir -p "$root/etc/termd"
chmod 0755 "$root/etc/termd"
ws=""
[ -d /home ] && ws="--set workspaces=[/home]"
if [ -e "$root/etc/termd/termd.yaml" ]; then
	echo "kept existing $root/etc/termd/termd.yaml (compare with: termd config-default)"
else
	# shellcheck disable=SC2086
	"$BINSRC/termd" config-default \
		--set socket=/run/termd/termd.sock \
		--set socket_group=termd \
		--set state_dir=/var/lib/termd \
		--set policy="$PREFIX/etc/termd/policy.yaml" $ws >"$tmp/termd.yaml"
	put 0644 "$tmp/termd.yaml" "$root/etc/termd/termd.yaml"
fi
if [ -e "$root/etc/termd/policy.yaml" ]; then
	echo "kept existing $root/etc/termd/policy.yaml (compare with: termd policy-default)"
else
	"$BINSRC/termd" policy-default >"$tmp/policy.yaml"
	put 0644 "$tmp/policy.yaml" "$root/etc/termd/policy.yaml"
fi

# Accounts: the termd group owns the socket; termd-gateway is the gateway's user.
if [ -n "$DESTDIR" ] || [ -n "${TERMD_INSTALL_NO_ACCOUNTS:-}" ]; then
	echo "staged install: not creating the termd group or the termd-gateway user (create them on the target: groupadd --system termd)"
elif [ $is_root = 0 ]; then
	echo "not root: not creating the termd group (needed only by the system units; user units do not use it)"
elif command -v groupadd >/dev/null 2>&1; then
	getent group termd >/dev/null 2>&1 || { groupadd --system termd && echo "created group termd (add people and agents that may connect: usermod -aG termd USER)"; }
	if ! getent passwd termd-gateway >/dev/null 2>&1; then
		useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
			--user-group --groups termd termd-gateway && echo "created user termd-gateway (for termd-gateway.service)"
	fi
else
	echo "no groupadd here: create a group named termd yourself for the system socket"
fi

[ $systemd_running = 1 ] && systemctl daemon-reload || true
echo "termd installed into $root."
if [ $is_root = 1 ] && [ -z "$DESTDIR" ]; then
	echo "next: systemctl enable --now termd.socket termd-operator.socket   (then: $PREFIX/bin/termd doctor --config $PREFIX/etc/termd/termd.yaml)"
else
	echo "next (per user): systemctl --user daemon-reload && systemctl --user enable --now termd.socket"
fi
