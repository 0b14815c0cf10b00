"""Readers and writers of cluster files, throughput tables and GPU maps."""
