#!/bin/bash
# Tests of task status-counts. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check file-written test -f status_counts.txt
check every-code-counted bash -c 'test "$(cut -d" " -f1 status_counts.txt | sort)" = "$(cut -d" " -f1 "$T/expected.txt" | sort)"'
check counts-and-order diff "$T/expected.txt" status_counts.txt
