"""defs."""
