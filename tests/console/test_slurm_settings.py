"""A profile's Slurm keys: read, and refused with the reason where they cannot work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from console.settings import Profile, SettingsError, load_settings
from console.slurm_token import SlurmTokenError, slurm_token


def profile_with(tmp_path: Path, lines: str) -> Profile:
    path = tmp_path / "console.toml"
    path.write_text(f'[profiles.prod]\nnodes = ["gpu01:50051"]\n{lines}\n', encoding="utf-8")
    return load_settings(path).profile("prod")


def test_the_slurm_keys_are_read(tmp_path: Path) -> None:
    profile = profile_with(tmp_path, 'slurm_url = "https://slurm.example:6820"\n'
                           'slurm_user = "ada"\nslurm_ca_file = "~/slurm-ca.pem"\n'
                           'slurm_token_command = "scontrol token lifespan=28800"')  # fmt: skip
    assert profile.slurm is not None
    assert (profile.slurm.url, profile.slurm.user) == ("https://slurm.example:6820", "ada")
    assert profile.slurm.token_command == ("scontrol", "token", "lifespan=28800")
    assert profile.slurm.ca_file == Path("~/slurm-ca.pem").expanduser()
    assert (profile.slurm.max_answer_bytes, profile.slurm.timeout_s) == (16 << 20, 10.0)
    assert profile_with(tmp_path, "").slurm is None


def test_the_slurm_answer_limits_are_read(tmp_path: Path) -> None:
    profile = profile_with(tmp_path, 'slurm_url = "https://slurm.example:6820"\n'
                           'slurm_user = "ada"\nslurm_max_answer_mib = 64\n'
                           "slurm_timeout_s = 2.5")  # fmt: skip
    assert profile.slurm is not None
    assert (profile.slurm.max_answer_bytes, profile.slurm.timeout_s) == (64 << 20, 2.5)


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ('slurm_url = "http://slurm.example:6820"\nslurm_user = "ada"', "plain http beyond"),
        ('slurm_url = "https://slurm.example:6820"', "needs slurm_user"),
        ('slurm_user = "ada"', "slurm_user need(s) slurm_url"),
        ('slurm_url = "ftp://x"\nslurm_user = "ada"', "http:// or https://"),
        (
            'slurm_url = "https://s:6820"\nslurm_user = "a"\nslurm_max_answer_mib = 0',
            "slurm_max_answer_mib must be a whole number from 1 to 1024, not 0",
        ),
        (
            'slurm_url = "https://s:6820"\nslurm_user = "a"\nslurm_max_answer_mib = 2.5',
            "slurm_max_answer_mib must be a whole number",
        ),
        (
            'slurm_url = "https://s:6820"\nslurm_user = "a"\nslurm_timeout_s = "10"',
            "slurm_timeout_s must be a number from 1 to 300, not '10'",
        ),
        (
            'slurm_url = "https://s:6820"\nslurm_user = "a"\nslurm_timeout_s = 3600',
            "slurm_timeout_s must be a number from 1 to 300",
        ),
        ("slurm_timeout_s = 5", "slurm_timeout_s need(s) slurm_url"),
    ],
)
def test_slurm_keys_that_cannot_work_are_refused(tmp_path: Path, lines: str, said: str) -> None:
    with pytest.raises(SettingsError, match="prod") as raised:
        profile_with(tmp_path, lines)
    assert said in str(raised.value)


def test_the_token_command_s_prefix_is_dropped_and_its_failure_named(tmp_path: Path) -> None:
    script = tmp_path / "token.py"
    script.write_text("print('SLURM_JWT=abc.def.ghi')\n", encoding="utf-8")
    slurm = profile_with(tmp_path, 'slurm_url = "http://127.0.0.1:6820"\nslurm_user = "ada"\n'
                         f'slurm_token_command = "{sys.executable} {script}"').slurm  # fmt: skip
    assert slurm is not None and slurm_token("prod", slurm) == "abc.def.ghi"
    failing = profile_with(tmp_path, 'slurm_url = "http://127.0.0.1:6820"\nslurm_user = "ada"\n'
                           'slurm_token_command = "false"').slurm  # fmt: skip
    assert failing is not None
    with pytest.raises(SlurmTokenError, match="slurm_token_command false failed"):
        slurm_token("prod", failing)
