"""A property-based fuzz of the HTTP API generated from its own OpenAPI schema (schemathesis):
no 5xx, and every answer conforms to the schema (documented status, content type and body).
In-process (ASGI: no socket, loopback or otherwise), bounded in examples per endpoint, in the slow
suite. Skipped where schemathesis is not installed (`pip install -e ".[dev]"` installs it)."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402  (schemathesis brings hypothesis)
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from perfmodel.service.app import create_app  # noqa: E402
from perfmodel.service.settings import ServiceSettings  # noqa: E402

pytestmark = pytest.mark.slow

EXAMPLES_PER_ENDPOINT = 25
"""Generated requests per operation (about 10 operations: a minute or two on a shared 2-core host)."""

APP = create_app(ServiceSettings(request_timeout_s=5, max_sweep_points=16, max_compare_configs=3, cache_bytes=0))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, headers={"Host": "127.0.0.1"})


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_ENDPOINT,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same examples every run
    database=None,  # no .hypothesis/ folder in the checkout
)
def test_no_generated_request_gets_a_5xx_or_an_answer_outside_the_schema(case):
    case.headers = {**(case.headers or {}), "Host": "127.0.0.1"}
    response = case.call(headers=case.headers)
    case.validate_response(
        response,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
