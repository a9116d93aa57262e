"""The API's routes for the privacy of what is remembered (docs: guide/forget.md).

- `forgetting`: forget by request (`POST …/memory/forget`) and muted topics (`…/memory/muted`);
- `review`: the memories `memory.review: required` holds for a person (`…/memory/review`), and pinning.

Each route's work is a function over a loaded agent (`forget_in`, `change_topics`, `approve_pending`, …) that the
memory page's forms call too (`api.ui.privacy_forms`).
"""
