"""Training projects: environments declared in ``pyproject.toml``, resolved, locked in
``envhub.lock`` and synced into the cache (``spec/lockfile.md``, ``docs/projects.md``)."""
