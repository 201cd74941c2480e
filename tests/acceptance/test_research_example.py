"""examples/research-agent.yaml as the README runs it: `wovyr run` in a subprocess with the
example's tools, the scripted model server as the OpenAI-compatible `default` provider
(`WOVYR_LLM_BASE_URL`); then the same run past its token budget pauses (exit 3), is granted
more with `wovyr workflows approve --grant-tokens`, and completes when run again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "research-agent.yaml")
TOOLS = str(ROOT / "examples" / "research_tools.py")
QUESTION = "question=How does a durable execution engine resume after a crash?"


def wovyr(home: Path, base_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "WOVYR_HOME": str(home),
        "WOVYR_LLM_BASE_URL": base_url,
        "WOVYR_LLM_MODEL": "m1",
    }
    for name in ("WOVYR_DATABASE_URL", "WOVYR_TENANT", "WOVYR_LLM_API_KEY"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "wovyr", *args],
        env=env,
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _script(usage: tuple[int, int] = (10, 5)) -> list[object]:
    return [
        tool_calls(("search_web", {"query": "durable execution crash"}, "s1"), usage=usage),
        tool_calls(
            ("pages_fetch", {"page_id": "durable-execution"}, "f1"),
            ("notes_save", {"title": "resume", "text": "replay the log"}, "n1"),
            usage=usage,
        ),
        text("It replays its log and resumes at the first unrecorded step [durable-execution].",
             usage=usage),
    ]  # fmt: skip


def test_the_research_example_answers_from_its_tools(tmp_path: Path) -> None:
    with ScriptedLLM(_script(), pick="turn") as llm:
        done = wovyr(tmp_path, llm.base_url, "run", EXAMPLE, "-a", TOOLS, "-i", QUESTION,
                     "--json")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        output = json.loads(done.stdout)["output"]
        assert output["answer"].endswith("[durable-execution].")
        assert output["turns"] == 3
        assert output["usage"] == {"input_tokens": 30, "output_tokens": 15}
        assert len(llm.completions) == 3
        first = llm.completions[0].body
        assert first["model"] == "m1"
        assert {t["function"]["name"] for t in first["tools"]} == {
            "search_web",
            "pages_fetch",
            "notes_save",
        }
        told = [m for m in llm.completions[1].body["messages"] if m["role"] == "tool"]
        assert json.loads(told[0]["content"])[0]["id"] == "durable-execution"
        read = [m for m in llm.completions[2].body["messages"] if m["role"] == "tool"]
        assert "replays the log" in read[1]["content"]  # the page read in turn 2
        assert json.loads(read[2]["content"]) == {"saved": "resume"}


@pytest.mark.slow  # three CLI processes
def test_past_its_budget_it_pauses_until_more_tokens_are_granted(tmp_path: Path) -> None:
    with ScriptedLLM(_script(usage=(9000, 1000)), pick="turn") as llm:
        args = ("run", EXAMPLE, "-a", TOOLS, "-i", QUESTION, "--id", "r-1")
        paused = wovyr(tmp_path, llm.base_url, *args)
        assert paused.returncode == 3, paused.stdout + paused.stderr  # 30,000 > 20,000
        assert "wovyr workflows approve r-1 research" in paused.stdout
        assert len(llm.completions) == 3
        granted = wovyr(tmp_path, llm.base_url, "workflows", "approve", "r-1", "research",
                        "--by", "ada", "--grant-tokens", "15000")  # fmt: skip
        assert granted.returncode == 0, granted.stdout + granted.stderr
        done = wovyr(tmp_path, llm.base_url, *args, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["output"]["turns"] == 3
        assert len(llm.completions) == 3  # the answer was recorded before the pause
