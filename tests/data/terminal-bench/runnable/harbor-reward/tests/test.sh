#!/bin/bash
if [ "$(bash /app/add.sh 2 40)" = 42 ] && [ "$(bash /app/add.sh -1 1)" = 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
