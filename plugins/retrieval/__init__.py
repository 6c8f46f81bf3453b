"""Retrieval drafting: proposing what followed the context in a corpus of the target's own earlier text."""
