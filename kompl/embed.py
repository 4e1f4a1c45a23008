"""Embedding functions: the offline hashing embedder (default) and local sentence-transformers.

An embedder turns texts into L2-normalised vectors. Every embedder has

    name: str        what the vector index records ("hashing", "sentence-transformers/<model>")
    dim: int         vector length
    embed(texts)     -> numpy array (len(texts), dim), float32, rows L2-normalised
    __call__(input)  -> list[list[float]]  (the Chroma EmbeddingFunction protocol)

The default, `hashing`, needs no download and no network: deterministic feature
hashing of word unigrams and character 3-5-grams (signed, with crc32, so the
same text gives the same vector in every process). It captures spelling and
shared vocabulary, not meaning; install sentence-transformers and a model for
semantic similarity, and set `embedder = "sentence-transformers/<model>"`.
Nothing here ever downloads: a missing package or model is an error naming the fix.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import zlib
from collections import Counter
from typing import Any, Protocol

import numpy as np

from kompl.errors import ConfigError, KomplError

DEFAULT_EMBEDDER = "hashing"
AUTO_ST_MODEL = "all-MiniLM-L6-v2"
_WORD = re.compile(r"\w[\w+#&'.-]*\w|\w", re.UNICODE)


class _Name(str):
    """A name that is also callable: `emb.name == "hashing"` and `emb.name() == "hashing"`.

    Chroma (1.5) calls `ef.name()` as a static method, while kompl records
    `emb.name` as an attribute; this lets one object serve both.
    """

    def __call__(self) -> str:
        return str(self)


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def __call__(self, input: list[str]) -> list[list[float]]: ...


class _ChromaCompatible:
    """The parts of Chroma's EmbeddingFunction protocol that do not depend on the model."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def __call__(self, input: list[str]) -> list[list[float]]:
        if isinstance(input, str):
            input = [input]
        return self.embed(list(input)).tolist()

    def embed_query(self, input: list[str]) -> list[list[float]]:
        return self(input)

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine", "ip", "l2"]

    def is_legacy(self) -> bool:
        return False

    def validate_config_update(self, old_config: dict, new_config: dict) -> None:
        return None

    @staticmethod
    def validate_config(config: dict) -> None:
        return None


class HashingEmbedder(_ChromaCompatible):
    """Offline, deterministic feature-hashing embedder (word unigrams + character n-grams)."""

    name = _Name(DEFAULT_EMBEDDER)  # on the class: Chroma calls type(ef).name()
    version = 1

    def __init__(self, dim: int = 512, ngram_min: int = 3, ngram_max: int = 5, word_weight: float = 2.0):
        if dim < 8:
            raise ConfigError(f"The hashing embedder needs at least 8 dimensions, got {dim}")
        self.dim = dim
        self.ngram_min = ngram_min
        self.ngram_max = ngram_max
        self.word_weight = word_weight

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim, "ngram_min": self.ngram_min, "ngram_max": self.ngram_max,
                "word_weight": self.word_weight, "version": self.version}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "HashingEmbedder":
        return HashingEmbedder(dim=int(config.get("dim", 512)), ngram_min=int(config.get("ngram_min", 3)),
                               ngram_max=int(config.get("ngram_max", 5)),
                               word_weight=float(config.get("word_weight", 2.0)))

    def features(self, text: str) -> Counter:
        """Weighted features of one text: "w:<word>" and "c:<n-gram>" (n-grams padded per word)."""
        words = _WORD.findall(text.casefold())
        feats: Counter = Counter()
        for word in words:
            feats["w:" + word] += self.word_weight
            padded = f" {word} "
            for n in range(self.ngram_min, self.ngram_max + 1):
                for i in range(0, max(0, len(padded) - n) + 1):
                    gram = padded[i:i + n]
                    if len(gram) == n:
                        feats["c:" + gram] += 1.0
        return feats

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, weight in self.features(text or "").items():
                h = zlib.crc32(feat.encode("utf-8"))
                sign = 1.0 if (h >> 31) & 1 else -1.0
                # Sublinear weight, so one word repeated many times does not dominate.
                out[row, h % self.dim] += sign * (1.0 + math.log(weight)) if weight >= 1 else sign * weight
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out


class SentenceTransformerEmbedder(_ChromaCompatible):
    """A sentence-transformers model that is already on this machine (never downloaded)."""

    name = _Name("sentence-transformers")  # the instance's name adds the model

    def __init__(self, model: str):
        from sentence_transformers import SentenceTransformer  # heavy: import only when chosen

        # HF_HUB_OFFLINE stops huggingface_hub from reaching the network even for metadata.
        previous = os.environ.get("HF_HUB_OFFLINE")
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            self.model = SentenceTransformer(model, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any load failure means "not available locally"
            raise KomplError(
                f"The embedding model {model!r} is not available on this machine ({type(exc).__name__}: {exc})",
                hint=(f"download it once while online, e.g. `python -c \"from sentence_transformers import "
                      f"SentenceTransformer; SentenceTransformer('{model}')\"`, or set embedder = \"hashing\""),
            ) from None
        finally:
            if previous is None:
                os.environ.pop("HF_HUB_OFFLINE", None)
            else:
                os.environ["HF_HUB_OFFLINE"] = previous
        self.model_name = model
        self.name = _Name(f"sentence-transformers/{model}")
        self.dim = int(self.model.get_sentence_embedding_dimension())

    def get_config(self) -> dict[str, Any]:
        return {"model": self.model_name}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "SentenceTransformerEmbedder":
        return SentenceTransformerEmbedder(config["model"])

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32)


def sentence_transformers_installed() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def get_embedder(settings: Any = None, spec: str | None = None) -> Embedder:
    """The embedder named by `spec` or `settings.embedder`.

    "hashing" (default): offline hashing embedder. "sentence-transformers/<model>":
    a locally installed model, an error naming the fix otherwise. "auto": the
    local sentence-transformers model when present, else hashing. "litellm/<model>":
    not available yet (will go through the model gateway).
    """
    spec = (spec if spec is not None else getattr(settings, "embedder", None) or DEFAULT_EMBEDDER).strip()
    if spec in ("hashing", "offline"):
        return HashingEmbedder()
    if spec.startswith("hashing-"):
        try:
            return HashingEmbedder(dim=int(spec.split("-", 1)[1]))
        except ValueError:
            raise ConfigError(f"Unknown embedder {spec!r}", hint='use "hashing" or "hashing-<dim>", e.g. "hashing-768"') from None
    if spec == "auto":
        if sentence_transformers_installed():
            try:
                return SentenceTransformerEmbedder(AUTO_ST_MODEL)
            except KomplError:
                pass
        return HashingEmbedder()
    if spec.startswith("sentence-transformers/"):
        model = spec.split("/", 1)[1]
        if not model:
            raise ConfigError("The embedder setting names no model", hint='e.g. embedder = "sentence-transformers/all-MiniLM-L6-v2"')
        if not sentence_transformers_installed():
            raise KomplError(
                f"The embedder {spec!r} needs the sentence-transformers package, which is not installed",
                hint=("install it with `pip install sentence-transformers` and download the model once while "
                      'online, or set embedder = "hashing" (offline, no download) or "auto"'),
            )
        return SentenceTransformerEmbedder(model)
    if spec.startswith("litellm/"):
        raise KomplError(
            f"The embedder {spec!r} (embeddings through the model gateway) is not implemented yet",
            hint='set embedder = "hashing" (offline) or "sentence-transformers/<model>" in kompl.toml',
        )
    raise ConfigError(
        f"Unknown embedder {spec!r}",
        hint='use "hashing" (default, offline), "auto", or "sentence-transformers/<model>"',
    )


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarities between the rows of two L2-normalised matrices."""
    if a.size == 0 or b.size == 0:
        return np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    return a @ b.T


__all__ = ["DEFAULT_EMBEDDER", "Embedder", "HashingEmbedder", "SentenceTransformerEmbedder",
           "cosine_matrix", "get_embedder"]
