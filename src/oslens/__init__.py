"""oslens: measure how a Linux kernel behaves and scales on the machine it runs
on, and explain what it finds."""

__version__ = "0.1.0"
