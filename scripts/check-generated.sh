#!/usr/bin/env bash
# Regenerates into a temporary directory and compares with the committed code.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go tool -modfile=tools/go.mod buf lint
go tool -modfile=tools/go.mod buf generate -o "$tmp"
status=0
while IFS= read -r f; do
	rel=${f#"$tmp"/}
	if ! cmp -s "$f" "$rel"; then
		echo "stale generated file: $rel (run: make generate)"
		status=1
	fi
done < <(find "$tmp" -type f)
# Generated files in the tree that generation no longer produces.
while IFS= read -r f; do
	if [ ! -f "$tmp/$f" ]; then
		echo "orphan generated file: $f (run: make generate and delete it)"
		status=1
	fi
done < <(find proto/termd gateway/internal/gen gateway/openapi -type f \( -name '*.pb.go' -o -name '*.pb.gw.go' -o -name '*.swagger.json' \))
if [ $status -ne 0 ]; then exit 1; fi
echo "generated code is up to date"
