"""Nodes by name in what people read: "gpu-node-03", not "127.0.0.1:39145".

Messages are often made where only a node's address (its target) is at hand
(an action's "reserve GPU 1 of 127.0.0.1:39145 for bob"). Before a message is
shown, `name_nodes` puts each watched node's host name where its address
stands. A node that never answered has no name yet: its address stays, and the
message says so.
"""

from __future__ import annotations

from console.fleet.model import FleetModel

NO_ANSWER = "no answer yet"


def spoken_name(fleet: FleetModel, target: str) -> str:
    """The node's host name; its address and "(no answer yet)" before it ever answered."""
    try:
        node = fleet.node(target)
    except KeyError:  # not a watched node: its address is all there is
        return target
    return node.name if node.info is not None else f"{target} ({NO_ANSWER})"


def name_nodes(fleet: FleetModel, text: str) -> str:
    """`text` with each watched node's address replaced by its name (see `spoken_name`)."""
    # Longest first: "10.0.0.1:5000" must not be taken for part of "10.0.0.1:50001".
    for node in sorted(fleet, key=lambda n: -len(n.target)):
        if node.target not in text:
            continue
        if node.info is None:
            said = f"{node.target} ({NO_ANSWER})"
            if said not in text:  # a text named already (a toast's, shown again) stays as it is
                text = text.replace(node.target, said, 1)
            continue
        # "gpu-node-03 (127.0.0.1:39145)" says the name already: the address goes.
        text = text.replace(f"{node.name} ({node.target})", node.name)
        text = text.replace(node.target, node.name)
    return text
