"""A scripted OpenAI-compatible chat-completions server for tests and benchmarks that run real processes
(`pagemind serve` cannot be handed a ScriptedModel): `python tests/support/openai_stub.py --port P [--latency-ms 50]`.

Every agent turn it serves takes two steps: to a user's message it answers with `memory_rethink` of the `human`
block (a memory edit; the block's size does not grow with the number of turns) — or, to a message that starts
"Please remember: ", with `archival_memory_insert` of the rest — and to that tool's result with
`send_message("echo: <the user's message>")`. A request that offers an app's own `get_weather` tool (the OpenAI
proxy's function-calling example, docs/pages/guide/openai-proxy.md) takes a step more: after the memory edit it
calls `get_weather` with the message's last word as the city, and to its result answers `send_message("The
weather: <result>")`. Each answer comes after a fixed latency. A minimal HTTP/1.1
server on asyncio (keep-alive, Content-Length bodies): a framework would cost the benchmark's shared CPU more
than the daemon it measures. A request with `stream: true` is answered as server-sent events, a few characters a
chunk, one chunk per write (chunked transfer encoding), as a provider streams. `GET /stats` reports the number of
completions served, how many of them streamed, and the seconds they took here in all (`service_s`: from the request
read to the answer written; the fixed latency, as the event loop's timers keep it, plus the answer's making), the
model's latency as a client of this server sees it, less the network.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

served = 0
streamed = 0
service_s = 0.0  # the time the completions took here, from the request read to the answer written (the model's latency)
REMEMBER = "Please remember: "  # a user message that starts so is saved with `archival_memory_insert` instead


def answer(body: dict) -> dict:
    """The scripted completion for a request body."""
    messages = body.get("messages", [])
    last = next((m for m in reversed(messages) if m.get("role") in ("user", "tool")), {"role": "user", "content": ""})
    user = next((m for m in reversed(messages) if m.get("role") == "user"), {"content": ""})
    text = str(user.get("content") or "")
    offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or ()}
    called = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
    if last["role"] == "user" and text.startswith(REMEMBER):
        name, arguments = "archival_memory_insert", {"content": text.removeprefix(REMEMBER)}
    elif last["role"] == "user":
        name, arguments = "memory_rethink", {"label": "human", "new_value": f"Last said: {text[:60]}"}
    elif called.get(last.get("tool_call_id")) == "get_weather":
        name, arguments = "send_message", {"message": f"The weather: {last.get('content')}"}
    elif "get_weather" in offered:
        name, arguments = "get_weather", {"city": (text.split() or [""])[-1].strip("?.!,")}
    else:
        name, arguments = "send_message", {"message": f"echo: {text}"}
    call = {
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency: float) -> None:
    """Serve requests on one connection until the client closes it."""
    global served, streamed, service_s
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            started = time.perf_counter()
            completion = method == "POST" and path.endswith("/chat/completions")
            if completion:
                await asyncio.sleep(latency)
                served += 1
                request = json.loads(raw or b"{}")
                status, payload = 200, answer(request)
                if request.get("stream"):
                    streamed += 1
                    await stream(writer, payload)
                    service_s += time.perf_counter() - started
                    continue
            elif path == "/stats":
                status, payload = 200, {"completions": served, "streamed": streamed, "service_s": service_s}
            else:
                status, payload = 404, {"error": {"message": f"no route {path}"}}
            data = json.dumps(payload).encode()
            writer.write(
                f"HTTP/1.1 {status} OK\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
                f"connection: keep-alive\r\n\r\n".encode()
                + data
            )
            await writer.drain()
            if completion:
                service_s += time.perf_counter() - started
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def stream(writer: asyncio.StreamWriter, payload: dict) -> None:
    """`payload` as a provider streams it: each server-sent event its own chunk of the body, written at once."""
    from pagemind.runtime.testing.sse import sse_bytes, stream_chunks  # only streaming needs it

    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n"
    )
    for event in sse_bytes(stream_chunks(payload, 2)).split(b"\n\n")[:-1]:
        event += b"\n\n"
        writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def main(port: int, latency: float) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, latency), "127.0.0.1", port, backlog=4096)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    asyncio.run(main(args.port, args.latency_ms / 1000))
