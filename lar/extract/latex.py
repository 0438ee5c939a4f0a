"""Placeholder: the latex extractor is being written."""
