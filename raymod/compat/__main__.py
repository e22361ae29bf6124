"""``python -m raymod.compat SCRIPT [ARGS...]``."""
import sys

from .runner import main

sys.exit(main())
