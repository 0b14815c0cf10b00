"""Stage 2, select: Gavel's priorities and walk over GPU types (`priority`)."""
