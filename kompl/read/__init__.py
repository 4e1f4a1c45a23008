"""Readers of the committed wiki: hybrid search, cited answers, chat sessions.

Every reader sees committed pages whose sources are not all archived; drafts,
rejected drafts and archived-only pages are left out unless the caller asks
for them (`include_drafts`, `include_archived`). Nothing here imports typer or rich.

    from kompl.read.search import search          # -> SearchResults(hits, notes)
    from kompl.read.ask import ask                # -> AskResult
    from kompl.read.chat import ChatSession, run_chat
"""
