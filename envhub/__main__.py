"""``python -m envhub``: the ``envhub`` command, run by this interpreter."""

from envhub.cli import main

if __name__ == "__main__":
    main()
