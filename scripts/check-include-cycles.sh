#!/usr/bin/env bash
# Fails when the folders of src/ include each other in a cycle (e.g. config/ -> shard/ ->
# config/). Each `#include "folder/file.h"` in src/<dir>/ is an edge <dir> -> <folder>;
# tsort finds any loop. Prints the folder graph; exit 0 = acyclic, 1 = a cycle (named).
set -uo pipefail
src="${1:-$(dirname "$0")/../src}"
cd "$src" || exit 2
edges=""
for dir in */; do
  dir=${dir%/}
  for to in $(grep -rhoE '^#include "[a-z_]+/' "$dir" | sed -E 's/^#include "([a-z_]+)\//\1/' |
    sort -u); do
    [ "$to" != "$dir" ] && [ -d "$to" ] && edges+="$dir $to"$'\n'
  done
done
echo "src/ folder include graph:"
printf '%s' "$edges" | awk '{ out[$1] = out[$1] " " $2 } END { for (d in out) print "  " d " ->" out[d] }' |
  sort
loops=$(printf '%s' "$edges" | tsort 2>&1 >/dev/null)
if [ -n "$loops" ]; then
  echo "include cycle between src/ folders:" >&2
  echo "$loops" | sed 's/^tsort: /  /' >&2
  exit 1
fi
echo "no include cycle between src/ folders"
