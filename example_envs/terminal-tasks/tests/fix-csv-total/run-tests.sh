#!/bin/bash
# Tests of task fix-csv-total. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check total-written test "$(cat total.txt)" = "$(cat "$T/expected.txt")"
check script-fixed test "$(python3 total.py data/sales.csv amount)" = "$(cat "$T/expected.txt")"
check other-file-and-column test "$(python3 total.py "$T/check.csv" count)" = 6.00
