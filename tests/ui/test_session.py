"""Session cookies, CSRF tokens and the persisted server secret."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from wovyr.platform.auth import Authenticator
from wovyr.server.ui.session import SECRET_FILE, Session, SessionCodec, load_secret

from .conftest import UiClient


@dataclass(frozen=True)
class Who:
    tenant: str = "acme"
    role: str = "operator"
    key_id: str = "key_1"
    actor: str = "alice"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_secret_is_created_once_private_and_reused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = load_secret(home)
    assert len(first) >= 32
    mode = stat.S_IMODE((home / SECRET_FILE).stat().st_mode)
    assert mode == 0o600
    assert load_secret(home) == first
    assert [p.name for p in home.iterdir()] == [SECRET_FILE]  # no temp files left behind
    assert load_secret(home, "configured-secret-value") == b"configured-secret-value"


def test_a_damaged_secret_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / SECRET_FILE).write_text("short")
    with pytest.raises(ValueError, match="delete it"):
        load_secret(tmp_path)


def test_cookie_round_trip_and_forgeries() -> None:
    clock = Clock()
    codec = SessionCodec(b"k" * 32, lifetime_seconds=60, now=clock)
    session, cookie = codec.issue(Who())
    assert codec.read(cookie) == session
    assert session.actor == "alice" and session.can("operator") and not session.can("admin")
    body, mac = cookie.split(".")
    assert codec.read(f"{body}x.{mac}") is None
    forged = mac[:-2] + ("BB" if mac.endswith("AA") else "AA")  # never the real MAC itself
    assert codec.read(f"{body}.{forged}") is None
    assert codec.read(body) is None and codec.read("") is None and codec.read(None) is None
    assert codec.read("a.b.c") is None and codec.read("!!.??") is None
    other = SessionCodec(b"z" * 32, now=clock)
    assert other.read(cookie) is None  # another server secret
    clock.now += 61
    assert codec.read(cookie) is None  # expired


def test_csrf_tokens_are_bound_to_the_session() -> None:
    codec = SessionCodec(b"k" * 32)
    a, _ = codec.issue(Who())
    b, _ = codec.issue(Who())
    assert codec.check_csrf(a, codec.csrf_token(a))
    assert not codec.check_csrf(a, codec.csrf_token(b))
    assert not codec.check_csrf(a, None) and not codec.check_csrf(a, "")
    assert codec.check_login("nonce", codec.login_token("nonce"))
    assert not codec.check_login("nonce", codec.login_token("other"))
    assert not codec.check_login(None, codec.login_token("nonce"))


def test_sign_out_stops_a_replayed_cookie() -> None:
    codec = SessionCodec(b"k" * 32)
    session, cookie = codec.issue(Who())
    codec.end(session)
    assert codec.read(cookie) is None
    _, fresh = codec.issue(Who())
    assert codec.read(fresh) is not None


def test_short_secrets_and_unknown_roles_are_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        SessionCodec(b"short")

    def session(role: str) -> Session:
        return Session(sid="s", key_id="key_1", tenant="acme", role=role, expires=0)

    # the API's ranking (wovyr.platform.auth.role_at_least), not a copy of it
    assert session("admin").can("operator") and not session("viewer").can("operator")
    assert session("operator").can("viewer") and not session("operator").can("admin")
    assert not session("superuser").can("viewer")


def test_an_unusable_home_falls_back_to_an_in_memory_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from fastapi import FastAPI

    from wovyr.server.ui import mount_ui
    from wovyr.settings import Settings
    from wovyr.testing import memory_engine

    engine = memory_engine()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    app = FastAPI()
    mount_ui(app, engine, Settings(home=not_a_dir), Authenticator(engine.store))
    assert "using one in memory" in caplog.text
    client = UiClient(app)
    try:
        assert client.get("/ui").headers["location"] == "/ui/login?next=%2Fui"
        assert client.get("/ui/login").status_code == 200
    finally:
        client.close()
        engine.close()


def test_a_configured_secret_signs_the_cookies(tmp_path: Path) -> None:
    from fastapi import FastAPI

    from wovyr.server.ui import mount_ui
    from wovyr.settings import Settings
    from wovyr.testing import memory_engine

    with memory_engine() as engine:
        mount_ui(
            FastAPI(),
            engine,
            Settings(home=tmp_path),
            Authenticator(engine.store),
            secret="a-configured-secret-of-some-length",
        )
    assert not (tmp_path / SECRET_FILE).exists()


def test_sign_out_survives_a_restart_on_the_same_store(tmp_path: Path) -> None:
    """Two sessions; one signs out. A new app, engine and store over the same SQLite file
    (a restarted server) refuses the signed-out cookie and still takes the other."""
    from fastapi import FastAPI

    from wovyr.engine.engine import Engine
    from wovyr.server.ui import mount_ui
    from wovyr.server.ui.routes import SESSION_COOKIE
    from wovyr.settings import Settings

    settings = Settings(home=tmp_path / "home")
    url = f"sqlite:///{tmp_path / 'wovyr.db'}"

    def server() -> tuple[Engine, FastAPI]:
        engine = Engine.open(url)
        app = FastAPI()
        mount_ui(app, engine, settings, Authenticator(engine.store))
        return engine, app

    engine, app = server()
    _, token = Authenticator(engine.store).create_key("acme", "operator", "op")
    cookies = {}
    for name in ("leaves", "stays"):
        client = UiClient(app)
        assert client.sign_in(token).status_code == 303
        cookies[name] = client.cookies[SESSION_COOKIE]
        if name == "leaves":
            csrf = client.csrf("/ui")
            assert client.post("/ui/logout", {"csrf_token": csrf}).status_code == 303
        client.close()
    engine.close()

    engine, app = server()  # restarted: nothing of the first process is left in memory
    client = UiClient(app)
    try:
        for name, works in (("leaves", False), ("stays", True)):
            page = client.get("/ui", headers={"cookie": f"{SESSION_COOKIE}={cookies[name]}"})
            assert (page.status_code == 200) is works, (name, page.status_code)
    finally:
        client.close()
        engine.close()


def test_with_a_store_sign_outs_are_kept_there_not_in_the_process(tmp_path: Path) -> None:
    from wovyr.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "wovyr.db")
    try:
        codec = SessionCodec(b"k" * 32, revoked=store)
        other = SessionCodec(b"k" * 32, revoked=store)  # another process on the same store
        cookies = []
        for _ in range(50):
            session, cookie = codec.issue(Who())
            codec.end(session)
            cookies.append(cookie)
        assert all(codec.read(c) is None and other.read(c) is None for c in cookies)
        assert len(codec._ended) == 0  # nothing per sign-out in this process
        _, fresh = codec.issue(Who())
        assert codec.read(fresh) is not None
    finally:
        store.close()


def test_rotating_the_session_key_signs_everyone_out_on_a_running_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`wovyr admin rotate-session-key` replaces the key file; a codec that reads it (a
    running server) refuses cookies signed before at its next request, with no restart, and
    signs new ones with the new key. The rotation is in the audit chain."""
    import json

    from wovyr.cli.main import main
    from wovyr.server.ui.session import SecretFile
    from wovyr.store.sqlite import SQLiteStore

    home = tmp_path / "home"
    monkeypatch.setenv("WOVYR_HOME", str(home))
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    running = SessionCodec(SecretFile(home))
    _, before = running.issue(Who())
    assert running.read(before) is not None
    old = (home / SECRET_FILE).read_bytes()

    assert main(["admin", "rotate-session-key", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rotated"] is True
    assert (home / SECRET_FILE).read_bytes() != old
    assert stat.S_IMODE((home / SECRET_FILE).stat().st_mode) == 0o600

    assert running.read(before) is None  # signed out at once
    _, after = running.issue(Who())
    assert running.read(after) is not None
    assert SessionCodec(load_secret(home)).read(after) is not None  # what a restart reads
    store = SQLiteStore(home / "wovyr.db")
    try:
        head = store.audit_head()
        assert head is not None and head.action == "ui.session_key_rotate"
        assert head.tenant == "" and head.actor.startswith("local:")
    finally:
        store.close()


def test_a_deleted_session_key_file_signs_everyone_out_too(tmp_path: Path) -> None:
    from wovyr.server.ui.session import SecretFile

    running = SessionCodec(SecretFile(tmp_path))
    _, cookie = running.issue(Who())
    (tmp_path / SECRET_FILE).unlink()
    assert running.read(cookie) is None
    assert (tmp_path / SECRET_FILE).is_file()  # made anew, 0600
    assert stat.S_IMODE((tmp_path / SECRET_FILE).stat().st_mode) == 0o600
