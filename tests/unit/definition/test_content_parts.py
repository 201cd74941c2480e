"""Message content parts (`llm` messages, `agent` attachments): a part of an unknown type,
one missing the field its type needs or carrying another type's, a URL of a scheme or a
data: URL of a media type its part does not take, inline data over the cap, and an image in
a message not from the user are each refused at the part (file:line:col)."""

from __future__ import annotations

import pytest

from wovyr.definition import load_definition
from wovyr.errors import DefinitionError, Problem
from wovyr.kinds.steps import MAX_INLINE_BYTES, ContentPart

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: see}
inputs:
  url: {type: string, required: true}
activities:
  - id: look
    llm:
      model: m
      messages:
        - role: ROLE
          content:
            - {type: text, text: "What is this?"}
            - PART
  - id: read
    agent:
      input: Read it.
      attachments: [ATTACHMENT]
"""
OK = "{type: image, url: 'https://example.com/a.png'}"


def _load(part: str = OK, role: str = "user", attachment: str = OK) -> None:
    text = FLOW.replace("PART", part).replace("ROLE", role).replace("ATTACHMENT", attachment)
    load_definition(text, "flow.yaml")


def _problem(**given: str) -> Problem:
    with pytest.raises(DefinitionError) as raised:
        _load(**given)
    (problem,) = raised.value.problems
    return problem


def test_parts_of_every_type_load() -> None:
    _load("{type: image, url: 'data:image/png;base64,iVBORw0KGgo='}")
    _load("{type: file, url: 'data:application/pdf;base64,JVBERi0=', filename: a.pdf}")
    _load("{type: image, url: '${{ inputs.url }}'}")  # checked once rendered
    _load("{type: image, artifact: 'sha256:" + "a" * 64 + "'}")
    _load("{type: file, artifact: 'sha256:" + "b" * 64 + "', filename: a.pdf}")
    _load(
        "{type: image, artifact: '${{ inputs.url }}'}",
        attachment="{type: image, artifact: 'sha256:" + "c" * 64 + "'}",
    )


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ("{type: image}", "an image part needs `url` (or `artifact`)"),
        ("{type: text, text: a, url: 'https://x.org'}", "a text part takes no `url`"),
        ("{type: image, url: 'ftp://x.org/a.png'}", "an image part's url is an http(s) URL"),
        ("{type: image, url: 'data:text/html;base64,AAAA'}", "an image part's data is one of"),
        ("{type: file, url: 'https://x.org/a.pdf'}", "a file part's url is a base64 data: URL"),
        ("{type: image, url: 'data:image/png,plain'}", "a data: URL is `data:<media type>;"),
        (
            "{type: image, url: 'https://x.org/a.png', artifact: 'sha256:" + "a" * 64 + "'}",
            "an image part takes one of `url` and `artifact`",
        ),
        ("{type: image, artifact: 'md5:abc'}", "an artifact is named by its digest, `sha256:"),
        ("{type: text, text: a, artifact: 'sha256:" + "a" * 64 + "'}", "a text part takes no"),
    ],
)
def test_a_wrong_part_is_located_at_the_part(part: str, says: str) -> None:
    problem = _problem(part=part)
    assert says in problem.message
    assert problem.path == "activities[0].llm.messages[0].content[1]"
    assert (problem.file, problem.line, problem.column) == ("flow.yaml", 14, 15)


def test_an_unknown_part_type_is_located_at_its_type() -> None:
    problem = _problem(part="{type: video, url: 'https://x.org/a.mp4'}")
    assert problem.message == "expected 'text', 'image' or 'file', got 'video'"
    assert problem.path == "activities[0].llm.messages[0].content[1].type"
    assert (problem.line, problem.column) == (14, 22)


def test_inline_data_over_the_cap_is_refused() -> None:
    data = "A" * MAX_INLINE_BYTES
    with pytest.raises(ValueError, match=f"is larger than {MAX_INLINE_BYTES}"):
        ContentPart.model_validate({"type": "image", "url": f"data:image/png;base64,{data}"})
    problem = _problem(attachment="{type: image, url: 'data:image/png;base64,@@'}")
    assert problem.path == "activities[1].agent.attachments[0]"  # (a bad one, located)


def test_only_the_user_sends_images() -> None:
    problem = _problem(role="system")
    assert problem.message == "only a user message's content may hold image or file parts"
    assert problem.path == "activities[0].llm.messages[0]"
    _load(part="{type: text, text: more}", role="system")
