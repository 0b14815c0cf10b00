"""What is scheduled: clusters, jobs, throughput tables, entities and job catalogues."""
