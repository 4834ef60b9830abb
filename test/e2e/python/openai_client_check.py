"""Drives the gateway with the official Python openai SDK; prints what each call gave as one JSON object.

Run by test/e2e/python-sdk.test.ts with NOVA_BASE_URL and NOVA_API_KEY set; the assertions live there.
"""
import json
import os

from openai import OpenAI

client = OpenAI(base_url=os.environ["NOVA_BASE_URL"], api_key=os.environ["NOVA_API_KEY"], max_retries=0)
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
out = {}

messages = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
first = client.chat.completions.create(model="agent-1", messages=messages, tools=tools)
call = first.choices[0].message.tool_calls[0]
messages.append(first.choices[0].message.model_dump(exclude_none=True))
messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"sky":"sunny"}'})
second = client.chat.completions.create(model="agent-1", messages=messages, tools=tools)
out["tool_loop"] = {"call": call.function.name, "answer": second.choices[0].message.content, "model": second.model}

text, models = "", set()
for chunk in client.chat.completions.create(model="agent-1", messages=messages, tools=tools, stream=True):
    models.add(chunk.model)
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
out["stream"] = {"text": text, "models": sorted(models)}

embedding = client.embeddings.create(model="agent-1", input=["one", "two"])
out["embeddings"] = {"vectors": [item.embedding for item in embedding.data], "prompt_tokens": embedding.usage.prompt_tokens}

completion = client.completions.create(model="agent-1", prompt="Say")
out["completion"] = completion.choices[0].text

response = client.responses.create(model="agent-1", input="Hi")
streamed = "".join(event.delta for event in client.responses.create(model="agent-1", input="Hi", stream=True)
                   if event.type == "response.output_text.delta")
out["responses"] = {"text": response.output_text, "model": response.model, "streamed": streamed,
                    "retrieved": client.responses.retrieve(response.id).id == response.id}

print(json.dumps(out))
