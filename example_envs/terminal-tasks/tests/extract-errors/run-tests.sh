#!/bin/bash
# Tests of task extract-errors. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check file-written test -f errors.txt
check error-messages diff "$T/expected.txt" errors.txt
check info-lines-left-out bash -c '! grep -q "recovered after" errors.txt'
check log-unchanged diff "$T/app.log" logs/app.log
