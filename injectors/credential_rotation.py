"""A data store's password changed on the server only: clients keep sending the old one (still in
their Secret) and new connections are refused, like a runtime auth change nobody rolled out."""

from __future__ import annotations

import base64
import hashlib
import shlex
from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (FaultError, Injector, Mechanism, PlannedState, UserInputError, Verification, get_object,
                              injector, namespace_of, running_pods)

REDIS = Mechanism("redis-config-set", "CONFIG SET requirepass through redis-cli in the store's pod")
POSTGRES = Mechanism("postgres-alter-user", "ALTER USER ... PASSWORD through psql in the store's pod")


class CredentialParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    secret: str = Field(..., description="the Secret holding the current password (what the clients read)")
    password_key: str = Field("password", description="key of the password in the Secret")
    username_key: str = Field("username", description="postgres: key of the user name in the Secret")
    port: int = Field(0, ge=0, description="the store's port (0: 6379 for redis, 5432 for postgres)")
    new_password: str | None = Field(None, description="default: a seeded random one")


def redis_command(port: int, auth: str, new: str) -> list[str]:
    return ["redis-cli", "-p", str(port), "-a", auth, "--no-auth-warning", "CONFIG", "SET", "requirepass", new]


def postgres_command(port: int, user: str, auth: str, new: str) -> list[str]:
    quoted_user = '"' + user.replace('"', '""') + '"'
    sql = f"ALTER USER {quoted_user} PASSWORD '{new.replace(chr(39), chr(39) * 2)}'"
    return ["env", f"PGPASSWORD={auth}", "psql", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", "postgres",
            "-v", "ON_ERROR_STOP=1", "-tAc", sql]


def auth_check_command(store: str, port: int, user: str, password: str) -> list[str]:
    """A command that succeeds only if ``password`` is accepted by the server."""
    if store == "redis":
        return ["sh", "-c", f"redis-cli -p {port} -a {shlex.quote(password)} --no-auth-warning ping | grep -q PONG"]
    return ["env", f"PGPASSWORD={password}", "psql", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", "postgres",
            "-tAc", "select 1"]


class CredentialState(PlannedState):
    namespace: str = Field("", description="the data store's namespace")
    pod: str = Field("", description="the data store's pod")
    pod_uid: str = Field("", description="its UID (the fault lives in the store's data, carried by this pod)")
    container: str = Field("", description="the data store's container")
    old: str = Field("", description="the password before")
    new: str = Field("", description="the password set")
    user: str = Field("", description="the user whose password changes")
    port: int = Field(0, description="the data store's port")


@injector("credential_rotation")
class CredentialRotation(Injector[CredentialParams]):
    """Change a redis or PostgreSQL password on the server side only (the clients' Secret keeps the old one).
    The mechanism names the store: ``redis-config-set`` (default) or ``postgres-alter-user``."""

    Params = CredentialParams
    State = CredentialState
    mechanisms = (REDIS, POSTGRES)
    targets = ("StatefulSet", "Deployment", "Pod")

    def dies_with_pod(self) -> bool:
        """CONFIG SET lives in the redis process (a new pod starts with its configured password);
        ALTER USER is written to the database's volume."""
        return self.mechanism.name == REDIS.name

    def carrier_pods(self, state: CredentialState) -> set[str]:
        return {state.pod_uid} if state.pod_uid else set()

    @property
    def store(self) -> str:
        return "redis" if self.mechanism.name == REDIS.name else "postgres"

    def plan(self) -> CredentialState:
        p = self.params
        ns = namespace_of(self.ctx, self.target)
        secret = get_object(self.ctx.kube, "Secret", p.secret, ns)
        if not secret or p.password_key not in (secret.get("data") or {}):
            raise UserInputError(f"params.secret: Secret {ns}/{p.secret} has no key {p.password_key!r}")
        data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
        pod = running_pods(self.ctx, self.target)[0]
        new = p.new_password or hashlib.sha256(f"{self.ctx.seed}:{p.secret}".encode()).hexdigest()[:20]
        return CredentialState(namespace=ns, pod=pod["metadata"]["name"], pod_uid=pod["metadata"]["uid"],
                               container=self.target.container or pod["spec"]["containers"][0]["name"],
                               old=data[p.password_key], new=new, user=data.get(p.username_key, ""),
                               port=p.port or (6379 if self.store == "redis" else 5432))

    def _exec(self, state: CredentialState, argv: list[str]) -> bool:
        proc = self.ctx.kube.kubectl("exec", "-n", state.namespace, state.pod, "-c", state.container, "--",
                                     *argv, check=False, timeout=60)
        return proc.returncode == 0

    def _accepts(self, state: CredentialState, password: str) -> bool:
        return self._exec(state, auth_check_command(self.store, state.port, state.user, password))

    def _set(self, state: CredentialState, auth: str, new: str) -> bool:
        argv = redis_command(state.port, auth, new) if self.store == "redis" else \
            postgres_command(state.port, state.user, auth, new)
        return self._exec(state, argv)

    def inject(self, state: CredentialState) -> None:
        if self._accepts(state, state.new):
            return
        if not self._set(state, state.old, state.new):
            raise FaultError(f"could not change the password in {state.namespace}/{state.pod}")

    def verify(self, state: CredentialState) -> Verification:
        old_ok, new_ok = self._accepts(state, state.old), self._accepts(state, state.new)
        return Verification(new_ok and not old_ok, f"server accepts the clients' password: {old_ok}; the new one: {new_ok}")

    def recover(self, state: CredentialState) -> None:
        if self._accepts(state, state.old):
            return
        if not self._set(state, state.new, state.old):
            raise FaultError(f"could not restore the password in {state.namespace}/{state.pod}",
                             hint="if the pod restarted it already runs with the Secret's password")
