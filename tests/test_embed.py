"""The embedders: offline hashing (deterministic, normalised), the factory and its errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kompl import embed
from kompl.errors import ConfigError, KomplError
from kompl.workspace import Settings


def test_hashing_is_deterministic_normalised_and_sized():
    emb = embed.HashingEmbedder()
    texts = ["Sam Bankman-Fried: the founder of FTX", "", "Taylor Swift"]
    a = emb.embed(texts)
    assert a.shape == (3, 512) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert not a[1].any()  # empty text: zero vector, no NaN
    assert np.array_equal(a, emb.embed(texts))
    assert emb.name == "hashing" and emb.dim == 512


def test_hashing_is_stable_across_processes():
    """crc32, not Python's salted hash(): another interpreter gives the same vector."""
    code = ("from kompl.embed import HashingEmbedder;"
            "print(repr(HashingEmbedder().embed(['Federal Reserve: rates'])[0][:8].tolist()))")
    out = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout for seed in ("1", "2")]
    assert out[0] == out[1]
    here = embed.HashingEmbedder().embed(["Federal Reserve: rates"])[0][:8].tolist()
    assert out[0].strip() == repr(here)


def test_similar_texts_are_closer_than_unrelated():
    emb = embed.HashingEmbedder()
    v = emb.embed(["Sam Bankman-Fried: FTX founder on trial", "Sam Bankman Fried: the FTX founder's trial",
                   "Taylor Swift: concert at Arrowhead Stadium"])
    sims = embed.cosine_matrix(v, v)
    assert sims[0, 1] > 0.5 > sims[0, 2]


def test_chroma_protocol():
    emb = embed.get_embedder(Settings())
    out = emb(["one text", "another"])
    assert isinstance(out, list) and len(out) == 2 and len(out[0]) == emb.dim
    assert isinstance(out[0][0], float)
    assert emb.name() == "hashing"  # Chroma calls name() as a method
    assert emb.embed_query(["q"]) == emb(["q"])
    assert emb.default_space() == "cosine" and not emb.is_legacy()
    rebuilt = embed.HashingEmbedder.build_from_config(emb.get_config())
    assert rebuilt(["one text"]) == emb(["one text"])


def test_chroma_accepts_it(tmp_path):
    chromadb = pytest.importorskip("chromadb")
    client = chromadb.EphemeralClient()
    emb = embed.HashingEmbedder(dim=64)
    col = client.get_or_create_collection("kompl-test", embedding_function=emb)
    col.add(ids=["a", "b"], documents=["Federal Reserve raises rates", "Taylor Swift tour"])
    hits = col.query(query_texts=["Federal Reserve rates"], n_results=1)
    assert hits["ids"][0] == ["a"]


def test_factory_choices(monkeypatch):
    assert isinstance(embed.get_embedder(None), embed.HashingEmbedder)
    assert embed.get_embedder(spec="hashing-128").dim == 128
    monkeypatch.setattr(embed, "sentence_transformers_installed", lambda: False)
    assert isinstance(embed.get_embedder(spec="auto"), embed.HashingEmbedder)
    with pytest.raises(KomplError, match="pip install sentence-transformers"):
        embed.get_embedder(spec="sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(KomplError, match="not implemented yet"):
        embed.get_embedder(spec="litellm/text-embedding-3-small")
    with pytest.raises(ConfigError, match="Unknown embedder"):
        embed.get_embedder(spec="word2vec")
    settings = Settings(embedder="hashing-64")
    assert embed.get_embedder(settings).dim == 64
