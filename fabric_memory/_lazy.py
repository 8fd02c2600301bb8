"""Package attributes that load on first use (PEP 562), so importing a package costs
only the modules a caller touches: ``fabric-memory hook`` starts without the session
reader or Pi's preparation, which a host has already run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_attributes(
    namespace: dict[str, Any], homes: Mapping[str, tuple[str, ...]]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the package whose globals are ``namespace``: each name
    of ``homes`` (relative module → the names it defines) is imported from its module on
    first use and kept in ``namespace``, so later lookups do not come back here."""
    module_of = {name: module for module, names in homes.items() for name in names}
    package = namespace["__name__"]

    def attribute(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    return attribute
