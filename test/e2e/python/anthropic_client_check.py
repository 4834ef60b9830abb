"""Drives the gateway with the official Python anthropic SDK; prints what each call gave as one JSON object.

Run by test/e2e/python-anthropic-sdk.test.ts with NOVA_BASE_URL (the gateway's origin: the SDK appends
/v1/...), NOVA_API_KEY, and the model ids NOVA_NATIVE_MODEL (api: anthropic) and NOVA_OPEN_MODEL
(api: openai, translated), NOVA_LIMITED_MODEL (always 429) and NOVA_FLAKY_MODEL (429 once, retry-after 1);
the assertions live there.
"""
import json
import os
import time

import anthropic

NATIVE = os.environ["NOVA_NATIVE_MODEL"]
OPEN = os.environ["NOVA_OPEN_MODEL"]
attempts = []
sent = []


def on_request(request):
    sent.append({"x-api-key": request.headers.get("x-api-key"), "authorization": request.headers.get("authorization"),
                 "anthropic-version": request.headers.get("anthropic-version")})


def on_response(response):
    attempts.append({"status": response.status_code, "at": time.monotonic(), "retry_after": response.headers.get("retry-after"),
                     "path": response.request.url.path})


client = anthropic.Anthropic(
    api_key=os.environ["NOVA_API_KEY"], base_url=os.environ["NOVA_BASE_URL"], max_retries=0,
    http_client=anthropic.DefaultHttpxClient(event_hooks={"request": [on_request], "response": [on_response]}))
tools = [{"name": "get_weather", "description": "Weather of a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
hello = [{"role": "user", "content": "Say hello"}]
out = {}

created = {}
streamed = {}
for model in (NATIVE, OPEN):
    message = client.messages.create(model=model, max_tokens=100, messages=hello)
    created[model] = {"model": message.model, "text": message.content[0].text, "stop_reason": message.stop_reason,
                      "usage": message.usage.model_dump(include={"input_tokens", "output_tokens", "cache_read_input_tokens",
                                                                "cache_creation_input_tokens"})}
    with client.messages.stream(model=model, max_tokens=100, messages=hello) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    streamed[model] = {"model": final.model, "text": text, "stop_reason": final.stop_reason, "output_tokens": final.usage.output_tokens}
out["create"] = created
out["stream"] = streamed
out["auth"] = sent[0]

loops = {}
for model in (NATIVE, OPEN):
    for use_stream in (False, True):
        def send(messages):
            if not use_stream:
                return client.messages.create(model=model, max_tokens=300, tools=tools, messages=messages)
            with client.messages.stream(model=model, max_tokens=300, tools=tools, messages=messages) as stream:
                return stream.get_final_message()

        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        first = send(messages)
        call = next(block for block in first.content if block.type == "tool_use")
        messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": '{"sky":"sunny"}'}]})
        second = send(messages)
        loops[f"{model} {'streamed' if use_stream else 'json'}"] = {
            "first": {"stop_reason": first.stop_reason, "tool": call.name, "input": call.input},
            "second": {"stop_reason": second.stop_reason, "text": second.content[0].text, "model": second.model},
        }
out["tool_loops"] = loops

out["count_tokens"] = {model: client.messages.count_tokens(model=model, messages=hello).input_tokens for model in (NATIVE, OPEN)}

first_page = client.models.list()
out["models"] = {
    "ids": [model.id for model in first_page.data],
    "types": sorted({model.type for model in first_page.data}),
    "paged": [model.id for model in client.models.list(limit=2)],
    "small_page_has_more": client.models.list(limit=2).has_more,
    "retrieved": client.models.retrieve(OPEN).model_dump(include={"type", "id"}),
}


def failure(call):
    try:
        call()
    except anthropic.APIStatusError as error:
        return {"class": type(error).__name__, "status": error.status_code, "body": error.body,
                "retry_after": error.response.headers.get("retry-after")}
    return None


stranger = anthropic.Anthropic(api_key="nova_sk_not-a-real-key", base_url=os.environ["NOVA_BASE_URL"], max_retries=0)
out["errors"] = {
    "401": failure(lambda: stranger.messages.create(model=NATIVE, max_tokens=10, messages=hello)),
    "404": failure(lambda: client.messages.create(model="no-such-model", max_tokens=10, messages=hello)),
    "400": failure(lambda: client.messages.create(model=NATIVE, max_tokens=10, messages="x")),
    "429": failure(lambda: client.messages.create(model=os.environ["NOVA_LIMITED_MODEL"], max_tokens=10, messages=hello)),
}

attempts.clear()
retried = client.with_options(max_retries=2).messages.create(model=os.environ["NOVA_FLAKY_MODEL"], max_tokens=10, messages=hello)
out["retry"] = {
    "text": retried.content[0].text,
    "statuses": [attempt["status"] for attempt in attempts],
    "retry_after": [attempt["retry_after"] for attempt in attempts],
    "gaps_ms": [round((b["at"] - a["at"]) * 1000) for a, b in zip(attempts, attempts[1:])],
}

print(json.dumps(out))
