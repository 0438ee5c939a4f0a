"""Shared storage: the central file index, the content-addressed store and unit reading.
The store knows no layer."""
from lar.store.cas import ContentStore, content_hash
from lar.store.fileindex import FileIndex, FileRecord
from lar.store.reader import UnitReader

__all__ = ["ContentStore", "FileIndex", "FileRecord", "UnitReader", "content_hash"]
