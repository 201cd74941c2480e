"""The side-effect policy's stored/API form, its ordering (`widened`) and what each kind
refuses of a step before it runs (`admits`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from wovyr.activities.builtin.http import KIND as HTTP
from wovyr.activities.builtin.http import HttpStep
from wovyr.activities.builtin.shell import KIND as SHELL
from wovyr.activities.builtin.shell import ShellStep
from wovyr.activities.policy import (
    RESTRICTED,
    TRUSTED,
    SideEffectPolicy,
    parse_policy,
    to_dict,
    widened,
)
from wovyr.errors import InputError

OPENED = replace(
    RESTRICTED, shell=True, shell_commands=("git", "/usr/bin/env"), allow_hosts=("db:5432",)
)


@pytest.mark.parametrize("policy", [TRUSTED, RESTRICTED, OPENED])
def test_the_json_form_reads_back_as_the_same_policy(policy: SideEffectPolicy) -> None:
    assert parse_policy(to_dict(policy)) == policy


def test_fields_not_given_come_from_the_base() -> None:
    assert parse_policy({"shell": True}) == replace(RESTRICTED, shell=True)
    assert parse_policy({}, base=TRUSTED) == TRUSTED


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"shel": True}, "policy.shel"),
        ({"shell": "yes"}, "policy.shell"),
        ({"shell_cpu_seconds": 0}, "policy.shell_cpu_seconds"),
        ({"shell_cpu_seconds": True}, "policy.shell_cpu_seconds"),
        ({"allow_networks": ["10.0.0.0/33"]}, "policy.allow_networks[0]"),
        ({"allow_networks": "10.0.0.0/8"}, "policy.allow_networks"),
        ({"allow_hosts": ["db"]}, "policy.allow_hosts[0]"),
        ({"allow_hosts": ["db:99999"]}, "policy.allow_hosts[0]"),
        ({"shell_commands": ["bin/tool"]}, "policy.shell_commands[0]"),
        ({"shell_env": [""]}, "policy.shell_env[0]"),
    ],
)
def test_a_bad_field_is_named(data: dict[str, Any], path: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(data)
    assert [p.path for p in caught.value.problems] == [path]


def test_shell_is_isolated_unless_the_host_says_otherwise() -> None:
    stored_before = {k: v for k, v in to_dict(OPENED).items() if k != "shell_isolation"}

    assert RESTRICTED.shell_isolation is True and TRUSTED.shell_isolation is False
    # a policy stored before the field existed runs isolated: a stored row fails closed
    assert parse_policy(stored_before).shell_isolation is True
    # turning it off reaches further (an admin over the API may not); turning it on does not
    assert widened(replace(OPENED, shell_isolation=False), OPENED) == ["shell_isolation"]
    assert widened(OPENED, replace(OPENED, shell_isolation=False)) == []


def test_not_an_object_is_refused() -> None:
    with pytest.raises(InputError, match="JSON object"):
        parse_policy(["shell"])


def test_widened_names_each_field_that_reaches_further() -> None:
    assert widened(RESTRICTED, TRUSTED) == []
    assert widened(RESTRICTED, RESTRICTED) == []
    assert set(widened(TRUSTED, RESTRICTED)) == {
        "shell", "shell_cwd", "private_network", "shell_env", "shell_cpu_seconds",
        "shell_memory_bytes", "shell_open_files", "shell_processes", "shell_file_bytes",
        "shell_isolation",
    }  # fmt: skip
    narrow = replace(RESTRICTED, allow_networks=("10.0.0.0/8",), allow_hosts=("db:5432",))
    assert widened(replace(narrow, allow_networks=("10.1.0.0/16",)), narrow) == []
    assert widened(replace(narrow, allow_networks=("10.0.0.0/7",)), narrow) == ["allow_networks"]
    assert widened(replace(narrow, allow_hosts=("db:5433",)), narrow) == ["allow_hosts"]
    assert widened(replace(narrow, shell_cpu_seconds=61), narrow) == ["shell_cpu_seconds"]
    assert widened(replace(narrow, shell_cpu_seconds=None), narrow) == ["shell_cpu_seconds"]
    listed = replace(RESTRICTED, shell_commands=("git",))
    assert widened(replace(listed, shell_commands=None), listed) == ["shell_commands"]
    assert widened(replace(listed, shell_commands=()), listed) == []


def shell(**spec: Any) -> ShellStep:
    return ShellStep.model_validate({"shell": {"argv": ["git", "status"], **spec}})


def test_shell_admits_nothing_when_shell_is_off_and_checks_literal_programs() -> None:
    assert SHELL.admits is not None
    assert [p.message for p in SHELL.admits(shell(), RESTRICTED)] == [
        "`shell` is not allowed (shell: false)"
    ]
    assert SHELL.admits(shell(cwd="/tmp"), TRUSTED) == []
    listed = replace(RESTRICTED, shell=True, shell_commands=("git", "/usr/bin/env"))
    assert SHELL.admits(shell(), listed) == []
    assert SHELL.admits(shell(argv=["/usr/bin/env", "x"]), listed) == []
    assert [p.path for p in SHELL.admits(shell(argv=["curl"]), listed)] == [("shell", "argv")]
    assert [p.path for p in SHELL.admits(shell(argv=["/bin/sh"]), listed)] == [("shell", "argv")]
    assert SHELL.admits(shell(argv=["${{ inputs.tool }}"]), listed) == []  # checked at dispatch
    assert SHELL.admits(shell(argv=["./tool"]), listed) == []  # known only in its directory
    found = SHELL.admits(shell(cwd="/", env={"LD_PRELOAD": "x"}), listed)
    assert [p.path for p in found] == [("shell", "cwd"), ("shell", "env")]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost:8080/x",
        "http://api.localhost/",
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/",
    ],
)
def test_http_refuses_a_literal_private_address_before_it_runs(url: str) -> None:
    step = HttpStep.model_validate({"http": {"url": url}})
    assert HTTP.admits is not None
    assert [p.path for p in HTTP.admits(step, RESTRICTED)] == [("http", "url")]
    assert HTTP.admits(step, TRUSTED) == []


@pytest.mark.parametrize(
    "url", ["https://example.com/", "http://${{ inputs.host }}/", "http://8.8.8.8/", "not a url"]
)
def test_http_leaves_names_and_expressions_to_dispatch(url: str) -> None:
    step = HttpStep.model_validate({"http": {"url": url}})
    assert HTTP.admits is not None
    assert HTTP.admits(step, RESTRICTED) == []


def test_http_admits_an_allow_listed_literal() -> None:
    step = HttpStep.model_validate({"http": {"url": "http://10.1.2.3:8443/"}})
    assert HTTP.admits is not None
    assert HTTP.admits(step, replace(RESTRICTED, allow_networks=("10.0.0.0/8",))) == []
    assert HTTP.admits(step, replace(RESTRICTED, allow_hosts=("10.1.2.3:8443",))) == []
    assert HTTP.admits(step, replace(RESTRICTED, allow_hosts=("10.1.2.3:443",))) != []
