#!/usr/bin/env bash
# make run: termd (and termd-gateway with the web console) on embedded
# defaults, state in ./.run, this checkout as the workspace. Ctrl-C stops both.
# ./.run (socket, state, the console's operator token, logs) is inside the
# workspace, so termd is told it is private (--private): no command it runs
# can read it, and the policy refuses commands that name it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
run="$root/.run"
mkdir -p "$run"
chmod 700 "$run"
sock="$run/termd.sock"
port="${TERMD_CONSOLE_PORT:-8765}"
console="http://127.0.0.1:$port"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
# Ctrl-C (or TERM) is how make run is meant to end: stop both, exit 0, so
# make does not report "Error 130".
stop() { trap - EXIT; cleanup; echo "termd stopped." >&2; exit 0; }
trap cleanup EXIT
trap stop INT TERM

answers() { bin/termctl --socket "$sock" status >/dev/null 2>&1; }
if answers; then
	echo "termd is already running from this checkout (socket $sock): use it (export TERMD_SOCKET=$sock), or stop it first (Ctrl-C where it runs)." >&2
	exit 1
fi

args=(--socket "$sock" --state-dir "$run/state" --workspace "$root" --private "$run")
if [ -x bin/termd-gateway ]; then args+=(--console-url "$console"); fi
bin/termd "${args[@]}" 2> >(tee -a "$run/termd.log" >&2) &
termd_pid=$!
pids+=("$termd_pid")
for _ in $(seq 100); do answers && break; kill -0 "$termd_pid" 2>/dev/null || break; sleep 0.1; done
if ! answers; then echo "termd did not start; see the messages above and $run/termd.log" >&2; exit 1; fi

if [ -x bin/termd-gateway ]; then
	bin/termd-gateway --socket "$sock" --listen "127.0.0.1:$port" --token-file "$run/gateway.token" 2> >(tee -a "$run/gateway.log" >&2) &
	gw_pid=$!
	pids+=("$gw_pid")
	up=""
	for _ in $(seq 100); do
		kill -0 "$gw_pid" 2>/dev/null || break
		if [ -s "$run/gateway.token" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
		sleep 0.1
	done
	# Another program on the port also answers: the gateway must still be alive a moment later.
	sleep 0.5
	if [ -z "$up" ] || ! kill -0 "$gw_pid" 2>/dev/null; then
		echo "termd-gateway did not start (see above; is port $port taken? choose another: TERMD_CONSOLE_PORT=18765 make run)" >&2
		exit 1
	fi
fi

cat <<MSG

termd is running.
  socket:     $sock  (root and your user also: $run/termd-operator.sock)
  state:      $run/state (receipts, signing keys)
  workspace:  $root  ($run is private: no command termd runs can read it)

Next, in another terminal:
  export TERMD_SOCKET=$sock
  bin/termctl status
  bin/termctl run -- ls -la                 # a read-only command runs at once
  bin/termctl run -- touch hello.txt        # a plain write in the workspace runs at once (sandboxed)
  bin/termctl plan -- rm hello.txt          # removing files needs approval in confirm mode
  bin/termctl pending                       # then: bin/termctl approve PLAN_ID; bin/termctl execute PLAN_ID --follow
  bin/termctl receipts list
  bin/termd doctor --socket $sock --state-dir $run/state   # what this host supports
MSG
if [ -x bin/termd-gateway ]; then
cat <<MSG
  Console:    $console  (sign in with the token in $run/gateway.token)
MSG
fi
echo
echo "Ctrl-C stops termd."
wait -n "${pids[@]}"
