#!/bin/bash
# Tests of task organise-inbox. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check text-files-moved test -f text/report.txt -a -f text/notes.txt
check csv-files-moved test -f data/sales.csv -a -f data/stock.csv
check log-files-moved test -f logs/server.log
check others-stay test -f inbox/README
check inbox-sorted bash -c '! ls inbox | grep -qE "\.(txt|csv|log)$"'
check contents-kept bash -c 'grep -qx "Quarterly report: sales up 4%." text/report.txt && grep -qx "pads,12" data/stock.csv'
