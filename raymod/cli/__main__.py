"""``python -m raymod.cli``: the ``raymod`` command."""
import sys

from . import main

sys.exit(main())
