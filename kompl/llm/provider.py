"""The litellm boundary: importing litellm once, quietly and offline, and which providers need no key."""

from __future__ import annotations

import ipaddress
import os
import threading
from typing import Any
from urllib.parse import urlparse

# Providers that serve models from the user's own machine or network and need no key.
NO_KEY_PROVIDERS = frozenset(
    {"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile", "xinference", "oobabooga", "lemonade"}
)
# Providers whose missing_keys (from litellm.validate_environment) are all needed, not alternatives.
ALL_KEYS_PROVIDERS = frozenset({"azure", "vertex_ai", "bedrock", "sagemaker"})

_litellm_module: Any = None
_litellm_lock = threading.Lock()


def _litellm() -> Any:
    """Import and configure litellm once: local price map, no telemetry, no callbacks, quiet."""
    global _litellm_module
    with _litellm_lock:
        if _litellm_module is None:
            # Without these (the literal string "true"), importing litellm fetches its
            # price map from the internet. An explicit "false" from the user is respected.
            for var in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE"):
                if os.environ.get(var, "").strip().lower() not in ("true", "false"):
                    os.environ[var] = "true"
            import litellm

            litellm.telemetry = False
            litellm.success_callback = []
            litellm.failure_callback = []
            litellm.callbacks = []
            litellm.suppress_debug_info = True
            litellm.set_verbose = False
            litellm.drop_params = True  # an unsupported option is dropped, not an error
            _litellm_module = litellm
    return _litellm_module

def _is_local_url(url: str | None) -> bool:
    """True for URLs on this machine or a private network (a self-hosted server)."""
    if not url:
        return False
    host = (urlparse(url if "://" in url else f"http://{url}").hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".local") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local
