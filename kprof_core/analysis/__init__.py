"""Layer 6, analysis: comparing two profiles name by name."""
