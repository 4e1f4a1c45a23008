"""Pipeline stages: extract, resolve, plan, draft, commit."""
