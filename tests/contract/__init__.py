"""The shared store contract: every backend runs these tests unchanged."""
