#!/bin/bash
# Tests of task csv-join. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check file-written test -f report.csv
check header bash -c 'test "$(head -n 1 report.csv)" = name,orders,total'
check customers-without-orders-left-out bash -c '! grep -q "Eli Stern" report.csv'
check totals-and-order diff "$T/expected.csv" report.csv
