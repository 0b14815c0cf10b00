"""The scheduler, its stages' interfaces, the registry that builds pipelines, and GPU placement."""
