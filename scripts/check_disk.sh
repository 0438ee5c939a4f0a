#!/usr/bin/env sh
# Before `make` builds .venv: is there room for it? The full install (CPU torch, the packaged
# MiniLM, tree-sitter grammars, polars, jupyterlab, playwright) takes about 3.1 GB, and pip
# unpacks each wheel in $TMPDIR first. Without this check a full disk shows up half-way through
# as pip's "OSError: [Errno 28] No space left on device".
# usage: check_disk.sh DIR MEGABYTES   (what an existing DIR/.venv already holds counts as done)
set -eu
dir=$1
need_mb=$2
if [ -d "$dir/.venv" ]; then
  have_mb=$(du -sm "$dir/.venv" | awk '{print $1}')
  need_mb=$((need_mb > have_mb ? need_mb - have_mb : 0))
fi
tmp=${TMPDIR:-/tmp}
for d in "$dir" "$tmp"; do
  free_kb=$(df -Pk "$d" | awk 'NR==2 {print $4}')
  free_mb=$((free_kb / 1024))
  if [ "$free_mb" -lt "$need_mb" ]; then
    echo "make: $d has $free_mb MB free; installing lar's environment (.venv) needs about $need_mb MB." >&2
    echo "make: free some space there (or point TMPDIR at a disk with room) and run make again." >&2
    exit 1
  fi
done
