"""The definition half of the engine: parse (cached), pin by content hash, register by
name and version, resolve what a caller names into a pinned definition, and check it
against the tenant's side-effect policy when it is accepted (`check_side_effects`)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

import wovyr.activities.builtin  # noqa: F401  (registers what runs the built-in kinds)
from wovyr.activities.kinds import KINDS
from wovyr.activities.policy import SideEffectPolicy
from wovyr.definition.model import Workflow
from wovyr.definition.parse import load_definition, load_definition_file, parse_document
from wovyr.definition.pin import canonical_json, content_hash
from wovyr.definition.preflight import workflow_steps
from wovyr.engine.outline import ActivityOutline, Outline
from wovyr.engine.runtime import DEFINITION_CACHE, SOURCE_CACHE, STORED_CACHE, Lru, Runtime
from wovyr.engine.tenants import TenantPolicy, policy_of, refusals
from wovyr.errors import DefinitionConflict, InputError, NotFound, Problem
from wovyr.store.base import DefinitionRecord, Store

__all__ = [
    "DEFINITION_CACHE",
    "DEV_REVISION",
    "SOURCE_CACHE",
    "STORED_CACHE",
    "Definitions",
    "Lru",
    "outline_of",
    "stored_workflow",
]

# What marks a development revision's version: `3+dev.2` is the second edit of version 3
# registered by `wovyr dev` (`definitions apply --revise`), as a semantic version's build part.
DEV_REVISION = "+dev."


class Definitions:
    """The definitions of one runtime's tenant; its caches are the runtime's (shared by
    every view of one engine)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def tenant(self) -> str:
        return self.runtime.tenant

    def outline(self, definition_hash: str) -> Outline:
        """What a view shows of the pinned definition `definition_hash` (`outline_of`)."""
        return outline_of(self.definition(definition_hash))

    def tenant_policy(self) -> TenantPolicy:
        """The policy this tenant's side effects run under now, and where it comes from:
        the engine's own when it was given one, else the tenant's (stored, or its
        default)."""
        if self.runtime.side_effects is not None:
            return TenantPolicy(self.runtime.tenant, self.runtime.side_effects, None, given=True)
        return policy_of(self.runtime.store, self.runtime.tenant)

    def side_effect_policy(self) -> SideEffectPolicy:
        """`tenant_policy`'s policy."""
        return self.tenant_policy().policy

    def check_side_effects(self, workflow: Workflow) -> None:
        """`InputError` naming every step of `workflow` this tenant's policy refuses before
        it runs (shell where shell is off, ...); the policy is read only when a step has a
        kind with side effects."""
        if not any(KINDS.get(spec.kind).admits for _, _, spec in workflow_steps(workflow)):
            return
        error = refusals(workflow, self.tenant_policy())
        if error is not None:
            raise error

    def hash_of(self, definition: Workflow | str) -> str:
        """The content hash of a definition (a model or YAML/JSON text), nothing stored."""
        cached = (
            self.runtime.caches.sources.get(definition) if isinstance(definition, str) else None
        )
        if cached is not None:
            return cached[1]
        workflow = self._as_workflow(definition)
        digest = content_hash(workflow)
        if isinstance(definition, str):
            self.runtime.caches.sources.put(definition, (workflow, digest))
        return digest

    def register(self, definition: Workflow | str | Path) -> str:
        """Store a definition by its content hash (idempotent); return the hash."""
        return self._pin(definition)[1]

    def _pin(self, definition: Workflow | str | Path) -> tuple[Workflow, str]:
        """Parse (cached by source text), hash and store a definition once per tenant."""
        cached = (
            self.runtime.caches.sources.get(definition) if isinstance(definition, str) else None
        )
        if cached is not None:
            workflow, digest = cached
        else:
            workflow = self._as_workflow(definition)
            digest = content_hash(workflow)
            if isinstance(definition, str):
                self.runtime.caches.sources.put(definition, (workflow, digest))
        if (self.runtime.tenant, digest) not in self.runtime.caches.stored:
            self.runtime.store.put_definition(self._record(workflow, digest))
            self._stored(workflow, digest)
        return workflow, digest

    def _record(self, workflow: Workflow, digest: str) -> DefinitionRecord:
        """The stored form of `workflow` (hashed `digest`) for this tenant, as of now."""
        return DefinitionRecord(
            digest,
            workflow.name,
            workflow.version,
            canonical_json(workflow),
            self.runtime.clock.now(),
            self.runtime.tenant,
        )

    def _stored(self, workflow: Workflow, digest: str) -> None:
        """Remember that this tenant's store holds `workflow` (hashed `digest`)."""
        self.runtime.caches.stored.put((self.runtime.tenant, digest), True)
        self.runtime.caches.definitions.put(digest, workflow)

    def definition(self, definition_hash: str, tenant: str | None = None) -> Workflow:
        """The pinned definition an execution runs on (cached)."""
        cached = self.runtime.caches.definitions.get(definition_hash)
        if cached is not None:
            return cached
        record = self.runtime.store.get_definition(definition_hash, tenant or self.runtime.tenant)
        if record is None:
            raise NotFound(f"definition {definition_hash} not found")
        workflow = stored_workflow(record)
        self.runtime.caches.definitions.put(definition_hash, workflow)
        return workflow

    def _as_workflow(self, definition: Workflow | str | Path) -> Workflow:
        if isinstance(definition, Workflow):
            return definition
        if isinstance(definition, Path):
            return load_definition_file(definition)
        return load_definition(definition)

    def apply(
        self,
        definition: Workflow | str | Path,
        *,
        audit_as: tuple[str, str] | None = None,
        revise: bool = False,
    ) -> tuple[str, str]:
        """Register a definition under its name and version: ("applied" | "unchanged", hash).
        A different definition under an existing name and version is refused, unless
        `revise` (what `wovyr dev` asks): then it is registered as the next development
        revision `VERSION+dev.N` ("revised"; see `_revise`). `audit_as`: the (action,
        target) the change is audited as (default `definition.apply`, `name@version`)."""
        workflow = self._as_workflow(definition)
        self.check_side_effects(workflow)
        outcome, digest = self._register(workflow, audit_as)
        if outcome == "conflict" or (revise and outcome == "unchanged"):
            if revise:
                return self._revise(workflow, digest, audit_as)
            raise DefinitionConflict(
                f"{workflow.name} version {workflow.version} is already applied with "
                "different content",
                hint="bump metadata.version to apply a new version",
            )
        return outcome, digest

    def _register(self, workflow: Workflow, audit_as: tuple[str, str] | None) -> tuple[str, str]:
        """One `apply_definition` of `workflow` under its own name and version."""
        digest = content_hash(workflow)
        record = self._record(workflow, digest)
        action, target = audit_as or ("definition.apply", f"{workflow.name}@{workflow.version}")
        audit = self.runtime.audit_entry(action, target, {"definition_hash": digest})
        outcome = self.runtime.store.apply_definition(record, audit=audit)
        if outcome != "conflict":
            self._stored(workflow, digest)
        return str(outcome), digest

    def _revise(
        self, workflow: Workflow, digest: str, audit_as: tuple[str, str] | None
    ) -> tuple[str, str]:
        """In development, the file is what runs by name: `workflow`, edited without a new
        `metadata.version` (or back to content applied before), is registered as the next
        development revision of its version, `VERSION+dev.N` (N from 1), so that it is the
        latest of its name. Nothing new is registered when it already is the latest (the
        version itself, or the last revision of the same content)."""
        latest = self.runtime.store.registered_definition(workflow.name, None, self.runtime.tenant)
        prefix = f"{workflow.version}{DEV_REVISION}"
        if latest is not None and latest.hash == digest:
            return "unchanged", digest
        if (
            latest is not None
            and latest.version.startswith(prefix)
            and content_hash(_versioned(workflow, latest.version)) == latest.hash
        ):
            return "unchanged", latest.hash
        numbers = [
            int(r.version[len(prefix) :])
            for r in self.runtime.store.list_registered(self.runtime.tenant)
            if r.name == workflow.name
            and r.version.startswith(prefix)
            and r.version[len(prefix) :].isdigit()
        ]
        revision = _versioned(workflow, f"{prefix}{max(numbers, default=0) + 1}")
        outcome, revised = self._register(revision, audit_as)
        if outcome == "conflict":  # applied meanwhile by another process: not ours to take
            raise DefinitionConflict(
                f"{revision.name} version {revision.version} was applied meanwhile",
                hint="apply again",
            )
        return "revised", revised

    def named(self, name: str, version: str | None = None) -> tuple[Workflow, str]:
        """A registered definition by name (the latest applied version, or `version`). Only
        `apply` registers: a definition merely run or started from its text (`wovyr run
        FILE`) is stored by hash and claims no name, so it is never found here."""
        record = self.runtime.store.registered_definition(name, version, self.runtime.tenant)
        if record is None:
            what = f"{name!r} version {version!r}" if version else repr(name)
            raise NotFound(
                f"no workflow {what} is registered",
                hint="apply it with `wovyr definitions apply FILE`",
            )
        return self.definition(record.hash), record.hash

    def resolve(self, definition: Workflow | str | Path) -> tuple[Workflow, str]:
        """(definition, hash) of a model, YAML/JSON text or a file `Path`, pinned. A string
        is always a document: registered names go through `named`."""
        return self._pin(definition)

    def target(
        self,
        definition: Workflow | str | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        path: Path | None = None,
    ) -> tuple[Workflow, str]:
        """(definition, hash) of what a start names: exactly one of a model or YAML/JSON text
        (`definition`), a file (`path`), both pinned, or a registered `name` (`version`, else
        the latest). Nothing is guessed from a string's shape."""
        given = {"definition": definition, "name": name, "path": path}
        named = [k for k, v in given.items() if v is not None]
        if len(named) != 1:
            found = ", ".join(named) or "none"
            message = f"give exactly one of definition, name or path (found {found})"
            raise InputError([Problem(message, path="definition")])
        if version is not None and name is None:
            raise InputError([Problem("a version goes with a name", path="version")])
        if name is not None:
            return self.named(name, version)
        if path is not None:
            return self._pin(path)
        assert definition is not None
        return self._pin(definition)


def _versioned(workflow: Workflow, version: str) -> Workflow:
    """`workflow` under another `metadata.version` (built from its canonical form)."""
    data = json.loads(canonical_json(workflow))
    data["metadata"]["version"] = version
    return Workflow.model_validate(data)


def stored_workflow(record: DefinitionRecord) -> Workflow:
    """The model of a stored definition, read back from the canonical JSON it was stored as
    (`canonical_json`): not re-parsed or re-validated as a document, so an execution pinned
    under an older release keeps running after the validator gets stricter."""
    try:
        return Workflow.model_validate_json(record.source)
    except ValidationError:  # not canonical JSON: read it as the document it is
        name = f"<definition {record.name}>"
        try:  # by the model only: a key refused in new documents since (`metadata.labels`)
            return Workflow.model_validate(parse_document(record.source, name)[0])
        except ValidationError:
            return load_definition(record.source, filename=name)  # its problems, located


def outline_of(workflow: Workflow) -> Outline:
    """What a view of an execution shows of `workflow` (`wovyr.engine.outline`)."""
    return Outline(
        tuple(
            ActivityOutline(
                id=act.id,
                kind=act.kind,
                needs=act.needs,
                max_attempts=act.effective_retry.max_attempts,
                max_iterations=act.repeat.max_iterations if act.repeat is not None else None,
                compensable=act.compensate is not None,
                redact=KINDS.get(act.kind).redact,
            )
            for act in workflow.activities
        )
    )
