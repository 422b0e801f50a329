"""Web mode: the cockpit served to a browser by textual-serve, from assets shipped in the package."""
