"""One GPU's detail: facts, readings, health, processes, the kill zone and dialog."""
