"""The built-in offline model `kompl/offline`.  (Skeleton: contract only.)

    respond(purpose, variables, schema) -> dict   # JSON-able, validates against `schema`

Deterministic; uses local NLP only (spaCy, TF-IDF, sentence ranking, pattern rules).
"""

from __future__ import annotations

MODEL_NAME = "kompl/offline"
