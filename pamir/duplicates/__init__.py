"""Copies and bursts: a picture's look, pairs linked into groups, and the groups kept in an index, listed or moved aside."""
