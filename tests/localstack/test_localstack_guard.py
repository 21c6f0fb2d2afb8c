"""Nothing leaves loopback in the host-mode LocalStack: the guard is in LocalStack's own
process and in every function it runs, and it reports what it refuses.

Two probes aim at a documentation address (192.0.2.123, TEST-NET-1) and a name that would
need DNS: a Lambda function that connects itself, and an API Gateway HTTP proxy that makes
LocalStack connect. Both are refused before any packet is sent and land in the guard's
report. (That the deployed service itself tried nothing outside loopback is checked after
its end-to-end run, test_service_e2e.py.)
"""

from __future__ import annotations

import io
import json
import sys
import urllib.error
import urllib.request
import zipfile

import pytest

from tests.localstack import server
from tests.localstack.plugin import GUARD_PROBES

pytestmark = pytest.mark.localstack

PROBE_ADDRESS, PROBE_NAME = GUARD_PROBES
PROBE_FUNCTION = "loopback-guard-probe"

PROBE_HANDLER = """
import socket

def handle(event, context):
    outcomes = {}
    for host in event["hosts"]:
        try:
            socket.create_connection((host, 80), timeout=2).close()
            outcomes[host] = "connected"
        except OSError as exc:
            outcomes[host] = str(exc)
    return outcomes
"""


def _zip(source: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("probe.py", source)
    return buffer.getvalue()


def test_a_function_is_refused_outside_loopback_and_reported(
    host_localstack: server.HostLocalStack,
) -> None:
    functions = host_localstack.client("lambda")
    functions.create_function(
        FunctionName=PROBE_FUNCTION,
        Runtime=f"python{sys.version_info.major}.{sys.version_info.minor}",
        Role="arn:aws:iam::000000000000:role/probe",
        Handler="probe.handle",
        Code={"ZipFile": _zip(PROBE_HANDLER)},
        Timeout=10,
    )
    reply = functions.invoke(
        FunctionName=PROBE_FUNCTION, Payload=json.dumps({"hosts": [PROBE_ADDRESS, PROBE_NAME]})
    )
    assert "FunctionError" not in reply, reply
    outcomes = json.loads(reply["Payload"].read())
    assert all("loopback guard refused" in outcome for outcome in outcomes.values()), outcomes
    reported = {
        line["target"] for line in host_localstack.refusals() if line["function"] == PROBE_FUNCTION
    }
    assert reported == {repr(PROBE_ADDRESS), repr(PROBE_NAME)}


def test_localstack_itself_is_refused_outside_loopback_and_reported(
    host_localstack: server.HostLocalStack,
) -> None:
    gateway = host_localstack.client("apigateway")
    api = gateway.create_rest_api(name="loopback-guard-probe")
    root = gateway.get_resources(restApiId=api["id"])["items"][0]["id"]
    gateway.put_method(
        restApiId=api["id"], resourceId=root, httpMethod="GET", authorizationType="NONE"
    )
    gateway.put_integration(
        restApiId=api["id"],
        resourceId=root,
        httpMethod="GET",
        type="HTTP_PROXY",
        integrationHttpMethod="GET",
        uri=f"http://{PROBE_ADDRESS}/",
    )
    gateway.create_deployment(restApiId=api["id"], stageName="probe")
    url = f"{host_localstack.endpoint}/_aws/execute-api/{api['id']}/probe/"
    with pytest.raises(urllib.error.HTTPError) as failed:
        urllib.request.urlopen(url, timeout=30)  # noqa: S310 - LocalStack on loopback
    assert failed.value.code >= 500
    from_localstack = [
        line
        for line in host_localstack.refusals()
        if not line["function"] and PROBE_ADDRESS in line["target"]
    ]
    assert from_localstack, host_localstack.refusals()
