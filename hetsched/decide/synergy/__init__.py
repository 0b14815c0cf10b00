"""Synergy's decide stages: the orderings (FIFO, SRTF, LAS, FTF, DRF, TETRIS), under Gavel's rules
(`ordering_stage`) or Synergy's own server rounds (`server_rounds`, with its merged rounds, leases and +opt round)."""
