#!/bin/sh
# usage: check_format_planted.sh ROOT
# Shows that check_format.sh can fail: a copy of ROOT's .clang-format beside one source laid out
# against it must make the check exit 1 naming that file.
root=${1:?usage: check_format_planted.sh ROOT}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/wire" && cp "$root/.clang-format" "$tmp/" || exit 1
printf 'int  planted ( ) {return 0 ;}\n' >"$tmp/wire/planted.cpp"
out=$("$(dirname "$0")/check_format.sh" "$tmp" 2>&1); got=$?
printf '%s\n' "$out"
if [ "$got" -ne 1 ]; then
  echo "expected exit 1 from the misformatted wire/planted.cpp, got $got"
  exit 1
fi
case $out in
  *"wire/planted.cpp:1:"*) exit 0 ;;
esac
echo "expected a line naming wire/planted.cpp:1:"
exit 1
