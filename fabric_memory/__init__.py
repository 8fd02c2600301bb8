"""fabric-memory: compaction and memory indexing for Pi coding-agent sessions."""

from .errors import FabricMemoryError
from .session import Entry, Session, iter_session_files, read_session

__version__ = "0.1.0"

__all__ = [
    "Entry",
    "FabricMemoryError",
    "Session",
    "__version__",
    "iter_session_files",
    "read_session",
]
