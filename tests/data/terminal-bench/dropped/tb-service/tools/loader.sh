#!/bin/sh
psql "$@"
