"""Elastic jobs (GPU type, GPU count and batch size that change between rounds): Pollux's goodput model, Sia's,
Pollux's and Gavel+TJ's decide stages, and the round loop that runs them (docs/rules.md R75-R85)."""
