#!/bin/bash
psql -h db -tc "select count(*) from users" | grep -q 1
