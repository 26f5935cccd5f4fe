"""`python -m app serve | agents | chat | run`, from a checkout: the `assist` command."""

import sys

from sentient_assist.cli import main

sys.exit(main())
