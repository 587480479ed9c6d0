#!/bin/bash
# Tests of task fix-permissions. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
mode() { stat -c %a "$1"; }
check build-executable test "$(mode scripts/build.sh)" = 755
check deploy-executable test "$(mode scripts/deploy.sh)" = 755
check key-private test "$(mode secrets/api.key)" = 600
check readme-not-executable bash -c '[[ $(stat -c %a scripts/README.md) != *[1357]* ]]'
check scripts-run bash -c 'test "$(./scripts/build.sh)" = building'
