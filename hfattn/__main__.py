"""``python -m hfattn`` (and ``accelerate launch -m hfattn``) runs the CLI."""

import sys

from hfattn.cli import main

sys.exit(main())
