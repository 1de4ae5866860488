"""Small operators for the benchmarks: the seed story's wait, without the external system."""
