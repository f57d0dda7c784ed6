"""How a node link authenticates: TLS (optionally mutual) and the bearer token.

The shared client's (gpufleet.client.security and .channel), named here for
the console's modules: one way to reach a node for the console, the terminal
and the daemon's own commands.
"""

from __future__ import annotations

from gpufleet.client.channel import open_channel as open_channel
from gpufleet.client.security import BearerToken as BearerToken
from gpufleet.client.security import LinkSecurity as LinkSecurity
