"""The simulator: the round loop, the fluid (ideal) run, results and metrics."""
