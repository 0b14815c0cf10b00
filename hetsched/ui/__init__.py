"""Plots, display names and the notebook widgets."""
