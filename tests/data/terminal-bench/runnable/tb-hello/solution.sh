#!/bin/bash
head -n 1 /app/greeting.txt | tr 'a-z' 'A-Z' > /app/hello.txt
