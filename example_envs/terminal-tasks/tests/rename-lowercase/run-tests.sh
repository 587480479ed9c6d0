#!/bin/bash
# Tests of task rename-lowercase. The verifier runs this in the final workspace (the current
# directory); the tests themselves are read-only in $T, out of the agent's reach.
export T="$(cd "$(dirname "$0")" && pwd)"
check() {
    local name=$1; shift
    if ( "$@" ) >/dev/null 2>&1; then echo "PASS $name"; else echo "FAIL $name"; fi
}
check beach_day.jpg bash -c 'grep -qx "image data of Beach Day.JPG" "photos/beach_day.jpg"'
check mountain_trip.jpg bash -c 'grep -qx "image data of Mountain Trip.jpg" "photos/mountain_trip.jpg"'
check city.png bash -c 'grep -qx "image data of city.png" "photos/city.png"'
check old_town_walk.png bash -c 'grep -qx "image data of Old Town Walk.PNG" "photos/old_town_walk.png"'
check nothing-else bash -c 'test "$(ls photos | wc -l)" = 4'
