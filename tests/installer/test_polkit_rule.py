"""The polkit rule install.sh installs, run by a real JavaScript engine (node) on the questions
systemd asks polkit: what it grants the gpufleet user, and what it leaves to polkit's defaults.

polkitd itself, asked by a real systemd, is exercised in the container test
(tests/installer/container_e2e.sh): there the daemon starts its workloads'
units, and is refused a unit that is not a workload's.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.installer.tools import INSTALLER, require_tool

RULE = INSTALLER / "polkit" / "50-gpufleet-workloads.rules"
MANAGE_UNITS = "org.freedesktop.systemd1.manage-units"
WORKLOAD_UNIT = "gpufleet-workload-0123abcd-w-12.service"
# The polkit object a rules file sees, reduced to what rules use.
HARNESS = """
const fs = require("fs");
const polkit = {Result: {YES: "yes", NO: "no", AUTH_ADMIN: "auth_admin", NOT_HANDLED: null},
                rules: [], addRule(rule) { this.rules.push(rule); }};
new Function("polkit", fs.readFileSync(process.argv[1], "utf8"))(polkit);
const answers = JSON.parse(fs.readFileSync(0, "utf8")).map(([user, id, details]) => {
    const action = {id, lookup: (key) => details[key]};
    for (const rule of polkit.rules) {
        const answer = rule(action, {user});
        if (answer !== null && answer !== undefined) return answer;
    }
    return null;
});
process.stdout.write(JSON.stringify(answers));
"""


def answers(questions: list[tuple[str, str, dict[str, str]]]) -> list[str | None]:
    node = require_tool("node", "nodejs", "the polkit rule")
    done = subprocess.run([node, "-e", HARNESS, "--", str(RULE)], input=json.dumps(questions),
                          capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_daemon_may_start_transient_units_and_manage_its_workload_units() -> None:
    asked = [
        ("gpufleet", MANAGE_UNITS, {}),  # StartTransientUnit on systemd 252: no details
        ("gpufleet", MANAGE_UNITS, {"unit": WORKLOAD_UNIT, "verb": "start"}),  # newer systemd
        *(("gpufleet", MANAGE_UNITS, {"unit": WORKLOAD_UNIT, "verb": verb})
          for verb in ("stop", "kill", "reset-failed")),
    ]  # fmt: skip
    assert answers(asked) == ["yes"] * len(asked)


@pytest.mark.parametrize(
    ("user", "action", "details"),
    [
        ("gpufleet", MANAGE_UNITS, {"unit": "ssh.service", "verb": "stop"}),
        ("gpufleet", MANAGE_UNITS, {"unit": "gpufleet-daemon.service", "verb": "kill"}),
        ("gpufleet", MANAGE_UNITS, {"unit": "gpufleet-workload-x.service.d", "verb": "stop"}),
        ("gpufleet", MANAGE_UNITS, {"unit": WORKLOAD_UNIT, "verb": "set-property"}),
        ("gpufleet", "org.freedesktop.systemd1.manage-unit-files", {}),
        ("gpufleet", "org.freedesktop.login1.reboot", {}),
        ("alice", MANAGE_UNITS, {}),
        ("alice", MANAGE_UNITS, {"unit": WORKLOAD_UNIT, "verb": "kill"}),
    ],
)
def test_everything_else_is_left_to_polkits_defaults(
    user: str, action: str, details: dict[str, str]
) -> None:
    assert answers([(user, action, details)]) == [None]
