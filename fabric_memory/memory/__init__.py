"""The memory index: normalize sessions into documents, index them with Tantivy,
search them (recall) and hydrate exact addresses from the source (expand).

Only :mod:`fabric_memory.memory.index` imports ``tantivy``; the public functions
are re-exported from :mod:`fabric_memory`.
"""
