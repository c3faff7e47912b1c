#!/bin/sh
# Catch2 test names must not hold ';': catch_discover_tests cuts a name there (a CMake list
# separator), Catch then matches no test, and ctest reports Passed for a test that ran nothing.
# usage: check_test_names.sh TESTS_DIR
bad=$(grep -rn --include='*.cpp' --include='*.hpp' 'TEST_CASE("[^"]*;' "${1:?usage: check_test_names.sh TESTS_DIR}")
if [ -n "$bad" ]; then
  printf '%s\n' "$bad"
  echo "these Catch2 test names hold ';', which ctest cannot run: use ',' instead"
  exit 1
fi
echo "no Catch2 test name holds ';'"
