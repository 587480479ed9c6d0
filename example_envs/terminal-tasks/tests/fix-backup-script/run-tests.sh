#!/bin/bash
# Tests of task fix-backup-script. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check documents-backed-up test -f "backups/my documents/letter one.txt" -a -f "backups/my documents/plan.txt"
check copies-equal diff "my documents/letter one.txt" "backups/my documents/letter one.txt"
try_script() {
    mkdir -p "/tmp/check dir/x" && printf 'one\n' > "/tmp/check dir/a b.txt" && printf 'two\n' > "/tmp/check dir/c.txt"
    rm -rf "backups/check dir"
    bash backup.sh "/tmp/check dir" 2>/dev/null
    test "$(cat "backups/check dir/a b.txt")" = one && test "$(cat "backups/check dir/c.txt")" = two
}
check script-handles-spaces try_script
check plain-names-still-work bash -c 'rm -rf backups/photos && bash backup.sh photos && test -f backups/photos/cat.txt'
