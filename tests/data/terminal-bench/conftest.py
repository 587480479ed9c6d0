# The task directories here are test data for envhub's importer (tests/test_import_terminal_bench.py):
# their tests/test_outputs.py files are the imported tasks' tests, not envhub's.
collect_ignore_glob = ["*"]
