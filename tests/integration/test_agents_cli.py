"""`wovyr agents apply|list|show|run` as a user runs them: the real CLI in a subprocess,
the scripted model server as the `default` provider (`WOVYR_LLM_BASE_URL`), and a module of
tool handlers loaded with `--activities`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

TOOLS = textwrap.dedent("""
    import wovyr


    @wovyr.activity("greet")
    def greet(name: str) -> str:
        return f"hello {name}"
    """)
AGENT = """\
apiVersion: wovyr/v1
kind: Agent
metadata: {name: helper, version: "1"}
spec:
  model: m1
  instructions: Be brief.
  tools: [greet]
"""


def wovyr(tmp_path: Path, base_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    src = Path(__file__).resolve().parents[2] / "src"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), str(tmp_path)]),
        "WOVYR_HOME": str(tmp_path / "home"),
        "WOVYR_LLM_BASE_URL": base_url,
    }
    for name in ("WOVYR_DATABASE_URL", "WOVYR_TENANT"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "wovyr", *args],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_apply_list_show_and_a_foreground_run_printing_the_answer(tmp_path: Path) -> None:
    (tmp_path / "agent_tools.py").write_text(TOOLS)
    good = tmp_path / "helper.yaml"
    good.write_text(AGENT)
    typo = tmp_path / "typo.yaml"
    typo.write_text(AGENT.replace("tools: [greet]", "tools: [greet, gret]"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(AGENT.replace("model: m1", "model: m1\n  max_turns: many"))
    script = [tool_calls(("greet", {"name": "Ada"}, "c1")), text("Ada says hello back.")]
    with ScriptedLLM(script, pick="turn") as llm:
        applied = wovyr(
            tmp_path, llm.base_url, "agents", "apply", str(good), str(typo), str(bad),
            "-a", "agent_tools", "--json",
        )  # fmt: skip
        assert applied.returncode == 1, applied.stderr
        results = {Path(r["file"]).name: r for r in json.loads(applied.stdout)}
        assert results["helper.yaml"]["result"] == "applied"
        [unknown] = results["typo.yaml"]["problems"]
        assert (unknown["line"], unknown["path"]) == (7, "spec.tools[1]")
        assert "did you mean 'greet'" in unknown["hint"]
        [turns] = results["bad.yaml"]["problems"]
        assert (turns["line"], turns["path"]) == (6, "spec.max_turns")

        listed = wovyr(tmp_path, llm.base_url, "agents", "list", "--json")
        assert [(a["name"], a["tools"]) for a in json.loads(listed.stdout)] == [
            ("helper", ["greet"])
        ]
        shown = wovyr(tmp_path, llm.base_url, "agents", "show", "helper", "--json")
        assert json.loads(shown.stdout)["agent"]["spec"]["instructions"] == "Be brief."
        missing = wovyr(tmp_path, llm.base_url, "agents", "show", "nobody")
        assert missing.returncode == 4 and "no agent 'nobody'" in missing.stderr

        ran = wovyr(
            tmp_path, llm.base_url, "agents", "run", "helper", "-i", "who=Ada",
            "-a", "agent_tools",
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "Ada says hello back."
        assert "2 turns" in ran.stderr
        first = llm.completions[0].body["messages"]
        assert first[-1] == {"role": "user", "content": '{"who": "Ada"}'}
        tool_result = llm.completions[1].body["messages"][-1]
        assert tool_result["content"] == "hello Ada"

        # without the handler loaded the run is refused before it starts
        refused = wovyr(tmp_path, llm.base_url, "agents", "run", "helper", "--text", "hi")
        assert refused.returncode != 0
        assert "no activity handler is registered as 'greet'" in refused.stderr
        assert len(llm.completions) == 2
        # the run is an execution of the agent's workflow
        runs = wovyr(tmp_path, llm.base_url, "workflows", "list", "--json")
        assert [r["workflow"] for r in json.loads(runs.stdout)["items"]] == ["agent.helper"]
