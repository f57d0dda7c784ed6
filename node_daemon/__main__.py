"""`python -m node_daemon` is `gpufleet`."""

from __future__ import annotations

import sys

from node_daemon.commands.main import main

sys.exit(main())
