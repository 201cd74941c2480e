"""Multimodal input end to end: an `llm` step's message content parts and an `agent` step's
`attachments` (text, images by http(s) or base64 `data:` URL, PDF files by `data:` URL)
reach the scripted model server (real HTTP) in each provider family's wire format, rendered
from the workflow's inputs; an image URL at an address the tenant's egress policy refuses
fails the step before any request, not retried, with the part located and the URL unsaid;
a part that renders wrong fails the step as bad input.

A part may name a stored artifact instead (`{type: image, artifact: "sha256:..."}`): its
bytes reach the provider as inline data, the history holds the digest and never the bytes,
another tenant's artifact of the same digest is a missing one, and a missing artifact (or
one of a media type its part does not take) fails the step, not retried, naming the part."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import SideEffectPolicy
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.artifacts import put_artifact
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
PDF = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"
PDF_URL = f"data:application/pdf;base64,{PDF}"
PUBLIC = "https://93.184.215.14/cat.png?sig=s3cr3t"  # a public address: no DNS needed

LLM = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: look}
inputs:
  image: {type: string, required: true}
  photo: {type: string, required: true}
activities:
  - id: look
    llm:
      provider: PROVIDER
      model: m1
      system: Describe images.
      messages:
        - role: user
          content:
            - {type: text, text: "What is in these?"}
            - {type: image, url: "${{ inputs.image }}"}
            - {type: image, url: "data:image/png;base64,${{ inputs.photo }}"}
    retry: {max_attempts: 3, initial_interval: 1s}
output: "${{ activities.look.output.text }}"
"""

AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: read}
inputs:
  pdf: {type: string, required: true}
activities:
  - id: read
    agent:
      provider: PROVIDER
      model: m1
      input: Summarize the report.
      attachments:
        - {type: file, url: "data:application/pdf;base64,${{ inputs.pdf }}", filename: r.pdf}
        - {type: image, url: "IMAGE"}
output: "${{ activities.read.output.text }}"
"""


def _engine(db: Path, llm: ScriptedLLM, policy: SideEffectPolicy | None = None) -> Engine:
    providers = {
        "openai": ProviderConfig("openai", llm.base_url),
        "claude": ProviderConfig("claude", llm.base_url, kind="anthropic"),
    }
    # the model server is admitted by name; every other private address is refused
    policy = policy or SideEffectPolicy(
        private_network=False, allow_hosts=(f"127.0.0.1:{llm.port}",)
    )
    return Engine(
        SQLiteStore(db),
        clock=ManualClock(T0),
        activities=ActivityRegistry(),
        providers=Providers(providers),
        side_effects=policy,
    )


def _looked(tmp_path: Path, provider: str) -> Any:
    """The body the provider received for the `llm` step of LLM (which answered)."""
    with ScriptedLLM([text("a cat and a dot")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        flow = LLM.replace("PROVIDER", provider)
        engine.start(flow, {"image": PUBLIC, "photo": PNG}, execution_id="e1")
        drain(engine)
        assert engine.query("e1").output == "a cat and a dot"
        (request,) = llm.requests
        engine.close()
    return request.body


def test_an_llm_step_s_image_parts_reach_an_openai_provider_as_image_url_parts(
    tmp_path: Path,
) -> None:
    assert _looked(tmp_path, "openai") == {
        "model": "m1",
        "messages": [
            {"role": "system", "content": "Describe images."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image_url", "image_url": {"url": PUBLIC}},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            },
        ],
    }


def test_an_llm_step_s_image_parts_reach_an_anthropic_provider_as_image_blocks(
    tmp_path: Path,
) -> None:
    assert _looked(tmp_path, "claude") == {
        "model": "m1",
        "max_tokens": 4096,
        "system": "Describe images.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image", "source": {"type": "url", "url": PUBLIC}},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            }
        ],
    }


def test_an_agent_s_attachments_go_with_its_task_to_each_family(tmp_path: Path) -> None:
    with ScriptedLLM([text("summary"), text("summary")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        for n, provider in enumerate(("openai", "claude")):
            flow = AGENT.replace("PROVIDER", provider).replace("IMAGE", PUBLIC)
            engine.start(flow, {"pdf": PDF}, execution_id=f"e{n}")
            drain(engine)
            assert engine.query(f"e{n}").output == "summary"
        (chat,) = llm.completions
        (messages,) = llm.messages
        # the inline data is in the history twice: the execution's input and the step's
        # rendered input, once each; the journaled model call keeps only the answer
        holding = [e.type for e in engine.history("e0") if PDF in json.dumps(e.data)]
        engine.close()
    assert holding == ["ExecutionStarted", "ActivityScheduled"]
    assert chat.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Summarize the report."},
                {
                    "type": "file",
                    "file": {"filename": "r.pdf", "file_data": PDF_URL},
                },
                {"type": "image_url", "image_url": {"url": PUBLIC}},
            ],
        }
    ]
    assert messages.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Summarize the report."},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                    "title": "r.pdf",
                },
                {"type": "image", "source": {"type": "url", "url": PUBLIC}},
            ],
        }
    ]


def test_an_image_at_a_private_address_is_refused_before_any_call(tmp_path: Path) -> None:
    private = "http://10.1.2.3/cat.png?token=s3cr3t"
    with ScriptedLLM([text("never")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(
            LLM.replace("PROVIDER", "openai"), {"image": private, "photo": PNG}, execution_id="e1"
        )
        engine.start(
            AGENT.replace("PROVIDER", "claude").replace("IMAGE", "http://127.0.0.1:9/x.png"),
            {"pdf": PDF},
            execution_id="e2",
        )
        drain(engine)
        llm_view, agent_view = engine.query("e1"), engine.query("e2")
        sent = llm.requests
        engine.close()
    assert sent == []
    error = llm_view.activities["look"]["error"]
    assert error["type"] == "MediaUrlRefused"
    assert llm_view.activities["look"]["attempt"] == 1  # not retried
    assert (
        "the image URL of messages[1].content[1] is at an address the tenant's"
        in (error["message"])
    )
    assert "s3cr3t" not in error["message"] and "10.1.2.3" not in error["message"]
    assert agent_view.status == "failed"
    assert agent_view.activities["read"]["error"]["type"] == "MediaUrlRefused"
    assert "messages[0].content[2]" in agent_view.activities["read"]["error"]["message"]


def test_a_private_image_the_policy_allows_is_sent(tmp_path: Path) -> None:
    private = "http://10.1.2.3/cat.png"
    with ScriptedLLM([text("a cat")]) as llm:
        policy = SideEffectPolicy(
            private_network=False,
            allow_hosts=(f"127.0.0.1:{llm.port}",),
            allow_networks=("10.1.0.0/16",),
        )
        engine = _engine(tmp_path / "w.db", llm, policy)
        engine.start(
            LLM.replace("PROVIDER", "openai"), {"image": private, "photo": PNG}, execution_id="e1"
        )
        drain(engine)
        assert engine.query("e1").output == "a cat"
        (request,) = llm.completions
        engine.close()
    assert request.body["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": private},
    }


def test_a_part_that_renders_wrong_fails_the_step_as_bad_input(tmp_path: Path) -> None:
    with ScriptedLLM([text("never")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(
            LLM.replace("PROVIDER", "openai"),
            {"image": "file:///etc/passwd", "photo": PNG},
            execution_id="e1",
        )
        engine.start(
            LLM.replace("PROVIDER", "openai"),
            {"image": PUBLIC, "photo": "A" * 600_000},
            execution_id="e2",
        )
        drain(engine)
        wrong, large = engine.query("e1"), engine.query("e2")
        sent = llm.requests
        engine.close()
    assert sent == []
    error = wrong.activities["look"]["error"]
    assert error["type"] == "InvalidInput"
    assert wrong.activities["look"]["attempt"] == 1  # not retried
    assert "an image part's url is an http(s) URL or a base64 data: URL" in error["message"]
    error = large.activities["look"]["error"]
    assert error["type"] == "InvalidInput", error
    assert "is larger than 524288" in error["message"]


# --- parts that name a stored artifact --------------------------------------------------------

LLM_REF = LLM.replace('url: "${{ inputs.image }}"', 'artifact: "${{ inputs.image }}"')
AGENT_REF = AGENT.replace(
    'url: "data:application/pdf;base64,${{ inputs.pdf }}"', 'artifact: "${{ inputs.pdf }}"'
).replace("IMAGE", PUBLIC)
PNG_BYTES, PDF_BYTES = base64.b64decode(PNG), base64.b64decode(PDF)
PNG_URL = f"data:image/png;base64,{PNG}"


def _by_ref(engine: Engine, execution_id: str, digest: str, provider: str = "openai") -> None:
    flow = LLM_REF.replace("PROVIDER", provider)
    engine.start(flow, {"image": digest, "photo": "AAAA"}, execution_id=execution_id)


def test_an_artifact_image_reaches_each_family_as_inline_data(tmp_path: Path) -> None:
    with ScriptedLLM([text("a dot"), text("a dot")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        record, created = put_artifact(engine, PNG_BYTES, "image/png")
        assert created
        _by_ref(engine, "e0", record.digest, "openai")
        _by_ref(engine, "e1", record.digest, "claude")
        drain(engine)
        assert [engine.query(f"e{n}").output for n in range(2)] == ["a dot", "a dot"]
        (chat,) = llm.completions
        (messages,) = llm.messages
        history = [json.dumps(e.data) for n in range(2) for e in engine.history(f"e{n}")]
        engine.close()
    assert chat.body["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": PNG_URL},
    }
    assert messages.body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }
    # the history holds the reference, never the bytes
    assert any(record.digest in data for data in history)
    assert not any(PNG in data for data in history)


def test_an_agent_attachment_by_artifact_is_sent_and_kept_as_a_reference(tmp_path: Path) -> None:
    with ScriptedLLM([text("summary")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        record, _ = put_artifact(engine, PDF_BYTES, "application/pdf")
        engine.start(
            AGENT_REF.replace("PROVIDER", "openai"), {"pdf": record.digest}, execution_id="e1"
        )
        drain(engine)
        assert engine.query("e1").output == "summary"
        (chat,) = llm.completions
        history = [json.dumps(e.data) for e in engine.history("e1")]
        engine.close()
    assert chat.body["messages"][0]["content"][1] == {
        "type": "file",
        "file": {"filename": "r.pdf", "file_data": PDF_URL},
    }
    assert any(record.digest in data for data in history)
    assert not any(PDF in data for data in history)


def test_another_tenants_artifact_is_missing_and_fails_the_step(tmp_path: Path) -> None:
    with ScriptedLLM([text("seen")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        record, _ = put_artifact(engine.for_tenant("a"), PNG_BYTES, "image/png")
        _by_ref(engine, "e1", record.digest)  # the default tenant has no such artifact
        drain(engine)
        missing = engine.query("e1")
        # its own copy of the same bytes is its own row: then its step runs
        assert put_artifact(engine, PNG_BYTES, "image/png")[1]
        _by_ref(engine, "e2", record.digest)
        drain(engine)
        second = engine.query("e2")
        sent = llm.requests
        engine.close()
    assert missing.status == "failed"
    error = missing.activities["look"]["error"]
    assert error["type"] == "ArtifactNotFound"
    assert missing.activities["look"]["attempt"] == 1  # not retried
    where = f"the artifact {record.digest} of the image part messages[1].content[1]"
    assert where in error["message"]
    assert second.status == "completed" and len(sent) == 1


def test_an_artifact_of_the_wrong_media_type_fails_the_step(tmp_path: Path) -> None:
    with ScriptedLLM([text("never")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        record, _ = put_artifact(engine, PDF_BYTES, "application/pdf")
        _by_ref(engine, "e1", record.digest)
        drain(engine)
        view = engine.query("e1")
        sent = llm.requests
        engine.close()
    assert sent == [] and view.status == "failed"
    error = view.activities["look"]["error"]
    assert "is application/pdf, which an image part does not take" in error["message"]
