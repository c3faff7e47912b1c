#!/bin/sh
# usage: check_includes_planted.sh DIR ALLOW_LIST FILE INCLUDE
# Shows that check_includes.py can fail: in a copy of DIR, FILE (relative to DIR) gains the line
# `#include INCLUDE` at its end, and this passes only when the check then exits 1 naming that
# file and line.
dir=${1:?usage: check_includes_planted.sh DIR ALLOW_LIST FILE INCLUDE}
allow=${2:?}; file=${3:?}; include=${4:?}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp -R "$dir" "$tmp/copy" || exit 1
printf '#include %s\n' "$include" >>"$tmp/copy/$file"
where="$tmp/copy/$file:$(wc -l <"$tmp/copy/$file" | tr -d ' '):"
out=$(python3 "$(dirname "$0")/check_includes.py" "$tmp/copy" "$allow" 2>&1); got=$?
printf '%s\n' "$out"
if [ "$got" -ne 1 ]; then
  echo "expected exit 1 from the planted #include $include, got $got"
  exit 1
fi
case $out in
  *"$where #include $include "*) exit 0 ;;
esac
echo "expected a line naming $where #include $include"
exit 1
