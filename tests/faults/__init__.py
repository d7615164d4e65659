"""Multi-process fault scenarios: real processes, real signals, evidence from the store."""
