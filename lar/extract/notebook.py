"""Placeholder: the notebook extractor is being written."""
