"""Failure knowledge (pure): log line anatomy, startup markers, failure signatures, the fatal-line rule.

Below both harvest (which collects evidence) and classify (which decides the category); imports nothing above it.
"""
