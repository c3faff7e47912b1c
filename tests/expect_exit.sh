#!/bin/sh
# usage: expect_exit.sh CODE COMMAND [ARGS...]: passes when COMMAND exits with exactly CODE
# (a crash or any other status fails), printing the command's output either way.
want=$1; shift
out=$("$@" 2>&1); got=$?
printf '%s\n' "$out" | tail -n 3
[ "$got" -eq "$want" ] && exit 0
echo "expected exit $want, got $got: $*"
exit 1
