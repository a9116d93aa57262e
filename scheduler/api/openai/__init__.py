"""An OpenAI-compatible memory proxy on the daemon: `POST /v1/chat/completions` and `GET /v1/models`, so that an app
gets long-term memory by changing its base URL (docs: guide/openai-proxy.md says what the app sees).

- `routes`: the two routes; `agents`: which agent a request's `model` (and end user) names, made on first use;
  `conversation`: which of the app's messages are new, and the idempotency key that stores each once;
  `app_tools`: the app's own `tools` and `tool_choice`, checked (a call to one pauses the turn and is the answer);
  `chunks`: a turn as OpenAI's `chat.completion.chunk` stream; `bodies`: the request and response bodies;
  `errors`: OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`.
"""
