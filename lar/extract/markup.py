"""Placeholder: the markup extractor is being written."""
