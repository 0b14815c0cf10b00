"""How fast a job runs: co-location estimates, profiling and Shockwave's batch-size adaptation."""
