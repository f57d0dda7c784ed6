"""plan_reload: what a reload applies, what needs a restart, and how the log says it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpufleet.policy import Role
from node_daemon.alerts.am_settings import AlertmanagerSettings
from node_daemon.alerts.rules import AlertSettings, ThresholdSettings
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.config import DaemonConfig
from node_daemon.control.settings import WorkloadSettings
from node_daemon.reload import plan_reload

ALICE, BOB = User("alice", Role.ADMIN, (), "a" * 64), User("bob", Role.VIEWER, (), "b" * 64)
BASE = DaemonConfig(auth=AuthSettings((ALICE, BOB)))
TLS = TlsSettings(Path("/etc/gpufleet/tls/server.crt"), Path("/etc/gpufleet/tls/server.key"))


def test_nothing_changed_says_so() -> None:
    plan = plan_reload(BASE, replace(BASE))
    assert (plan.summary(), plan.needs_restart, plan.config) == ("reload: no changes", (), BASE)


def test_users_by_name_and_what_changed_about_them_never_the_token() -> None:
    carol = User("carol", Role.OPERATOR)
    promoted = replace(BOB, role=Role.OPERATOR, token_sha256="c" * 64)
    plan = plan_reload(BASE, replace(BASE, auth=AuthSettings((promoted, carol))))
    assert plan.changes == (
        "1 user added (carol)", "1 user removed (alice)", "1 user changed (bob: role/token)"
    )  # fmt: skip
    assert "c" * 64 not in plan.summary()


def test_rules_teams_kill_policy_workloads_and_alertmanager_parts_are_named() -> None:
    hot = replace(AlertSettings().gpu_temp, warning=70.0)
    new = replace(
        BASE, teams={"ml": ("alice",)}, allow_kill_job_processes=True,
        alerts=replace(AlertSettings(), gpu_temp=hot, memory_temp=ThresholdSettings()),
        workloads=WorkloadSettings(accounts={"alice": "asmith"}),
        alertmanager=AlertmanagerSettings(urls=("http://127.0.0.1:9093",)),
    )  # fmt: skip
    before = replace(BASE, alertmanager=AlertmanagerSettings(urls=("http://127.0.0.1:9094",)))
    assert plan_reload(before, new).changes == (
        "teams changed: ml",
        "alert rules changed: gpu_temp, memory_temp",
        "alertmanager urls changed",
        "allow_kill_job_processes false -> true",
        "workload accounts changed: alice",
    )
    assert plan_reload(BASE, new).changes[2] == "alertmanager push started"
    assert plan_reload(new, BASE).changes[2] == "alertmanager push stopped (no urls)"


def test_settings_bound_at_start_are_kept_and_named() -> None:
    new = replace(
        BASE, listen="0.0.0.0:50051", state_dir=Path("/elsewhere"), gpus=4,
        workloads=WorkloadSettings(launcher="direct"), auth=replace(BASE.auth, tls=TLS),
    )  # fmt: skip
    plan = plan_reload(BASE, new)
    assert plan.needs_restart == ("listen", "gpus", "state_dir", "workloads.launcher", "tls")
    assert plan.config == BASE  # everything in force kept: TLS cannot be turned on live
    assert plan.changes == ()


def test_a_new_certificate_applies_live_but_requiring_client_certificates_does_not() -> None:
    on = replace(BASE, auth=replace(BASE.auth, tls=TLS))
    renewed = replace(on, auth=replace(on.auth, tls=replace(TLS, cert=Path("/new.crt"))))
    assert plan_reload(on, renewed).changes == ("tls certificate files changed",)
    assert plan_reload(on, renewed).config == renewed
    strict = replace(on, auth=replace(on.auth, tls=replace(TLS, require_client_cert=True)))
    assert plan_reload(on, strict).needs_restart == ("tls",)
    assert plan_reload(on, strict).config == on
