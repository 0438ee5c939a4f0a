"""Shared storage: the central file index, the content-addressed store and unit reading.
The store knows no layer."""
from .cas import ContentStore, content_hash
from .fileindex import FileIndex, FileRecord
from .reader import UnitReader

__all__ = ["ContentStore", "FileIndex", "FileRecord", "UnitReader", "content_hash"]
