import envhub_test_not_installed_anywhere  # noqa: F401  (the point of this plugin)
