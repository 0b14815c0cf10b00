"""Stage 1, decide (docs/architecture.md#folders): what each system decides a round, one folder per system.
`gavel/` the allocation policies (LPs, FIFO, Gandiva, AlloX, POP), `shockwave/` the planner, `synergy/` the orderings
and Synergy's server rounds, `elastic/` Sia, Pollux and Gavel+TJ on elastic jobs."""
