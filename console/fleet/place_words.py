"""A GPU as a chooser lists it ("gpu-node-02 · GPU 3"), and what typed text finds it.

People name a GPU the way the rest of the console does: "node-02 3",
"gpu-node-02:3" (Ctrl+F's form, console/fleet/search.py), "gpu-node-02 GPU 3".
Every typed word must fit. A number alone is the GPU's index, exactly: in
"node-02 3" the 3 is GPU 3 (not GPU 13, and not every GPU of a node whose name
holds a 3); any other word is a part of the listed text.
"""

from __future__ import annotations


def place_label(node_name: str, gpu: int) -> str:
    """ "gpu-node-02 · GPU 3"."""
    return f"{node_name} · GPU {gpu}"


def place_matches(typed: str, node_name: str, gpu: int) -> bool:
    """Does every word of `typed` (case ignored, ":" read as a space) fit this GPU?"""
    label = place_label(node_name, gpu).lower()
    for word in typed.lower().replace(":", " ").split():
        number = word.isascii() and word.isdigit()
        fits = int(word) == gpu if number else word in label
        if not fits:
            return False
    return True
