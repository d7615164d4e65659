"""A tiny text toolkit with three bugs, one per module."""
