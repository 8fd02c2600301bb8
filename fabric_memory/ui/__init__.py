"""``fabric-memory ui``: a local web view of the memory (see :mod:`fabric_memory.ui.app`)."""
