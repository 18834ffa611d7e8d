"""Measurements: traffic tools and their parsers, the scenario engine, statistics, results and reports; suites/ reruns each seed paper."""
