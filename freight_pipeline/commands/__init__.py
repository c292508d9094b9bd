"""The operator commands of ``freight-pipeline``: ``sync``, ``status``, ``demo`` and ``ui``."""
