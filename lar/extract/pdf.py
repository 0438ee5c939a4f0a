"""Placeholder: the pdf extractor is being written."""
