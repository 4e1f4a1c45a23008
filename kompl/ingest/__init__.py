"""Ingest: documents, folders, URLs, bookmarks and stdin become stored markdown sources."""

from kompl.ingest.service import IngestReport, Input, expand, ingest, retry_inputs

__all__ = ["IngestReport", "Input", "expand", "ingest", "retry_inputs"]
