#!/bin/bash
# Tests of task fix-failing-tests. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check suite-passes python3 -m unittest -q test_wordstats
check tests-unchanged diff "$T/test_wordstats.py" test_wordstats.py
python3 "$T/hidden.py"
