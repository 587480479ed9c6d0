#!/bin/bash
# Tests of task fix-makefile. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check builds bash -c 'make clean >/dev/null 2>&1; rm -rf build; make && test -f build/report.txt'
check report-content bash -c 'test "$(cat build/report.txt)" = "$(printf "MONTHLY REPORT\nAll systems normal.")"'
check up-to-date-after-build make -q build/report.txt
rebuilds() {
    touch -d '2001-01-01' build/report.txt && printf 'Something changed.\n' > src/body.txt
    make >/dev/null && grep -qx 'Something changed.' build/report.txt
}
check rebuilds-when-body-changes rebuilds
check clean-removes-build bash -c 'make clean && test ! -e build'
