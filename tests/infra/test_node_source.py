"""Node.js for the CDK synthesis comes from the project's own files, never from the machine.

`make test` must pass on a machine with nothing but Python, make and venv: jsii's node is
the pinned wheel's binary (requirements-infra.txt), and the synthesis runs with no ``node``
on its PATH (tests/infra/conftest.py). ``make test-hidden-tools`` runs the whole suite that
way from a fresh clone, with node, redis-server and nginx hidden.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from tests.support.infra import Synthesis, offline_aws_env, wheel_node

# Node.js release lines with upstream support at the time of writing (20 ended 2026-04-30).
SUPPORTED_NODE_MAJORS = {22, 24}


def test_jsii_runs_the_wheels_node_and_no_node_is_on_the_synthesis_path() -> None:
    env = offline_aws_env()
    assert env["JSII_NODE"] == str(wheel_node())
    assert shutil.which("node", path=env["PATH"]) is None


def test_jsii_in_the_test_process_runs_the_wheels_node() -> None:
    """Tests that import the CDK here (test_alarms, test_profiles) start jsii in the test
    process itself: it runs the wheel's node, whatever PATH holds or lacks."""
    assert os.environ["JSII_NODE"] == str(wheel_node())


def test_the_wheels_node_is_a_supported_lts_release() -> None:
    version = subprocess.run(
        [str(wheel_node()), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) in SUPPORTED_NODE_MAJORS, version


def test_the_stack_synthesizes_without_node_on_path(synthesis: Synthesis) -> None:
    assert synthesis.template["Resources"]
