#!/bin/bash
set -e
cd /app/data
for f in *; do echo "$f $(wc -l < "$f")"; done | sort > /app/out/counts.txt
