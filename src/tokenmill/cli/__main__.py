"""``python -m tokenmill.cli``: the ``tokenmill`` command."""

import sys

from tokenmill.cli import main

if __name__ == "__main__":  # not when a fork server imports the main module again (as __mp_main__)
    sys.exit(main())
