"""`python -m node_daemon` is `gpufleet`."""

from __future__ import annotations

import sys

from node_daemon.cli import main

sys.exit(main())
