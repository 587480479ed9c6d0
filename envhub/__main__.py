"""``python -m envhub``: the ``envhub`` command, run by this interpreter."""

import os
import sys

# ``python -m`` puts the working directory first on sys.path; the ``envhub`` command does not,
# and neither does this: run in a bundle's directory, the bundle's json.py must not replace json.
if not sys.flags.safe_path and sys.path and sys.path[0] == os.getcwd():
    del sys.path[0]

from envhub.cli import main  # noqa: E402  (after sys.path is fixed)

if __name__ == "__main__":
    main()
