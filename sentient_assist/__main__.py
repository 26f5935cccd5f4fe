"""`python -m sentient_assist serve | agents | chat | run`: the `assist` command."""

import sys

from sentient_assist.cli import main

sys.exit(main())
