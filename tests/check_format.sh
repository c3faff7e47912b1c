#!/bin/sh
# usage: check_format.sh ROOT
# The C++ sources under ROOT (emulator, wire, verbs-shim, tools, tests) follow ROOT/.clang-format
# as Debian 12's clang-format 14 lays them out: other versions break some lines differently, so
# only this one's verdict counts. scripts/install-deps.sh installs it.
root=${1:?usage: check_format.sh ROOT}
format=$(command -v clang-format-14 || true)
if [ -z "$format" ]; then
  echo "clang-format-14 is not installed (scripts/install-deps.sh installs it)"
  exit 1
fi
cd "$root" || exit 1
files=$(find emulator wire verbs-shim tools tests -path tests/data -prune -o \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -print 2>/dev/null | sort)
[ -n "$files" ] || { echo "no C++ sources under $root"; exit 1; }
# shellcheck disable=SC2086 # one word per path: the tree's paths hold no spaces
if ! "$format" --dry-run -Werror $files; then
  echo "these files differ from .clang-format's layout: clang-format-14 -i FILE rewrites one"
  exit 1
fi
echo "$(printf '%s\n' $files | wc -l) files follow .clang-format"
