"""Property-based fuzzing of the catalog with schemathesis, from the vendored REST spec 1.11.0.

The fuzzed server has authentication on (``secure_catalog_server``), and every generated
request carries a valid bearer token of the ``admin`` client, so that the fuzzer reaches the
routes instead of being refused at the door. Every operation of ``rest-catalog-open-api.yaml``
gets ``MAX_EXAMPLES`` generated requests (valid and invalid, derandomized: the same requests
on every run), half of them naming a seeded namespace, table and view, sent to the real
server on loopback. Checks: no 5xx (``not_a_server_error``), every answer conforms to the spec's
response schema for its status (``response_schema_conformance``), and no 401 outside the token
endpoint (``not_refused``): the spec lists 401 for every route, so a refused fuzzer would pass
the other checks without testing anything. The requests sent are counted and reported at the
end of the module (``fuzz: N calls to M operations``).

A client that names no warehouse gets no ``prefix`` in ``GET /v1/config``, so it uses the
spec's ``/v1/{prefix}/x`` as ``/v1/x`` (spec: "prefix" is only present when the config answer
sets it; the prefixed form is tested in ``test_catalog_prefix.py``): the schema is loaded with
the ``{prefix}`` segment and parameter removed.
"""

from __future__ import annotations

import copy
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.conftest_catalog import SecureCatalogHandle

SPEC_FILE = Path(__file__).resolve().parents[1] / "spec" / "rest-catalog-open-api.yaml"
"""The REST spec 1.11.0, vendored under tests/spec (Apache-2.0, LICENSE and NOTICE beside it)."""
# Examples per operation (20 in CI). At least 10,000 calls: LAKEHOUSE_FUZZ_EXAMPLES=400.
MAX_EXAMPLES = int(os.environ.get("LAKEHOUSE_FUZZ_EXAMPLES", "20"))
# Other requests than CI's (derandomized) ones: LAKEHOUSE_FUZZ_SEED=<integer>.
FUZZ_SEED = os.environ.get("LAKEHOUSE_FUZZ_SEED")
PREFIX_SEGMENT = "/{prefix}"
PREFIX_REF = "#/components/parameters/prefix"
ERROR_MODEL = {"$ref": "#/components/schemas/ErrorModel"}
ERROR_WRAPPER = {"$ref": "#/components/schemas/IcebergErrorResponse"}
TOKEN_ENDPOINT = "/v1/oauth/tokens"
"""Public, and answers 401 ``invalid_client`` to a wrong secret (RFC 6749 5.2) by design."""
CLIENT = "admin"
"""The fuzzer's client: every role on the whole catalog."""
CALLS: Counter[str] = Counter()
"""Requests the fuzzer sent, by operation label (counted by ``counted``)."""
STATUSES: Counter[int] = Counter()
"""The fuzzer's answers, by status code."""


@cache
def _raw_spec() -> dict[str, Any]:
    return yaml.safe_load(SPEC_FILE.read_text())


def _wrapped_errors(node: Any) -> Any:
    """``node`` with every response body schema ``ErrorModel`` replaced by the wrapper."""
    if node == ERROR_MODEL:
        return ERROR_WRAPPER
    if isinstance(node, dict):
        return {key: _wrapped_errors(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_wrapped_errors(value) for value in node]
    return node


def without_prefix(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as served here: no ``{prefix}`` segment, error bodies inside their wrapper.

    Spec 1.11.0 declares some error answers as a bare ``ErrorModel`` (the views' 404 and 409,
    ``UnsupportedOperationResponse``) although its own examples for them, every other error
    response (``IcebergErrorResponse``: "JSON wrapper for all error responses (non-2xx)") and
    the Java client's ``ErrorResponseParser`` use ``{"error": ErrorModel}`` (apache/iceberg
    PR 8914 moved the other responses to the wrapper). The server sends the wrapper everywhere,
    so those declarations are corrected here rather than the check switched off.
    """
    spec = copy.deepcopy(spec)
    spec["paths"] = _wrapped_errors(spec["paths"])
    spec["components"]["responses"] = _wrapped_errors(spec["components"]["responses"])
    paths: dict[str, Any] = {}
    for path, item in spec["paths"].items():
        for operation in [item, *item.values()]:
            if isinstance(operation, dict) and "parameters" in operation:
                operation["parameters"] = [
                    p for p in operation["parameters"] if p.get("$ref") != PREFIX_REF
                ]
        paths[path.replace(PREFIX_SEGMENT, "")] = item
    spec["paths"] = paths
    return spec


SEEDED_TABLE = "sales"
SEEDED_VIEW = "sales_view"


def counted(ctx: Any, response: Any, case: schemathesis.Case) -> None:
    """Check that counts the call in ``CALLS`` and ``STATUSES``: one per response validated."""
    del ctx
    CALLS[case.operation.label] += 1
    STATUSES[response.status_code] += 1


def not_refused(ctx: Any, response: Any, case: schemathesis.Case) -> None:
    """Check that a request sent with a valid token is not refused as unauthenticated.

    Raises:
        AssertionError: The request carried no bearer token, or was answered 401 (outside
            the token endpoint, whose 401 judges the client secret in the body).
    """
    del ctx
    sent = response.request.headers.get("Authorization", "")
    if not sent.startswith("Bearer "):
        raise AssertionError(f"{case.operation.label}: sent without a bearer token")
    if response.status_code == 401 and case.operation.path != TOKEN_ENDPOINT:
        raise AssertionError(f"{case.operation.label}: 401 for a valid token: {response.text}")


CHECKS = [not_a_server_error, response_schema_conformance, not_refused]


@pytest.fixture(scope="module", autouse=True)
def call_report(request: pytest.FixtureRequest) -> Iterator[Counter[str]]:
    """Report how many requests the module sent, and to how many operations, at its end."""
    CALLS.clear()
    STATUSES.clear()
    started = time.monotonic()
    yield CALLS
    line = (f"fuzz: {sum(CALLS.values())} calls to {len(CALLS)} operations "
            f"(up to {MAX_EXAMPLES} examples each) in {time.monotonic() - started:.0f} s; "
            f"status codes: {dict(sorted(STATUSES.items()))}")
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():  # shown without ``-s``
        reporter.write_line("\n" + line)


@pytest.fixture(scope="module")
def rest_catalog(secure_catalog_server: SecureCatalogHandle) -> RestCatalog:
    """A pyiceberg client of the secure catalog, with the admin credential."""
    return RestCatalog("fuzz", uri=secure_catalog_server.uri,
                       credential=secure_catalog_server.credential(CLIENT))


def _seed(rest_catalog: RestCatalog) -> str:
    """A new namespace holding one table with data and one view; returns the namespace."""
    namespace = f"fuzz_{uuid.uuid4().hex[:6]}"
    _reseed(rest_catalog, namespace)
    return namespace


def _reseed(rest_catalog: RestCatalog, namespace: str) -> None:
    """Put back what the fuzzer dropped or renamed: the namespace, its table and its view."""
    if not rest_catalog.namespace_exists(namespace):
        rest_catalog.create_namespace(namespace, {"owner": "fuzz"})
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", "b", "c"])})
    if not rest_catalog.table_exists(f"{namespace}.{SEEDED_TABLE}"):
        table = rest_catalog.create_table(f"{namespace}.{SEEDED_TABLE}", data.schema)
        table.append(data)
    if not rest_catalog.view_exists(f"{namespace}.{SEEDED_VIEW}"):
        sql = SQLViewRepresentation(type="sql", sql=f"SELECT * FROM {SEEDED_TABLE}",
                                    dialect="spark")
        version = ViewVersion(version_id=1, schema_id=0, timestamp_ms=int(time.time() * 1000),
                              summary={}, representations=[sql], default_namespace=[namespace])
        rest_catalog.create_view(f"{namespace}.{SEEDED_VIEW}", data.schema, version)


@pytest.fixture(scope="module")
def seeded(rest_catalog: RestCatalog) -> str:
    """State for the fuzzer, so that not every answer is a 404.

    The fuzzer drops and renames it: it is put back before each operation, and before each
    example of an operation that drops or renames (``_destructive``).
    """
    return _seed(rest_catalog)


def _destructive(operation: Any) -> bool:
    """Whether an operation may drop or rename the seeded namespace, table or view."""
    return bool(operation.method.upper() == "DELETE" or operation.path.endswith("/rename"))


def _operations() -> list[Any]:
    loaded = schemathesis.openapi.from_dict(without_prefix(_raw_spec()))
    return [result.ok() for result in loaded.get_all_operations()]


def _naming_seeded(namespace: str) -> Any:
    def rename(case: schemathesis.Case) -> schemathesis.Case:
        names = {"namespace": namespace, "table": SEEDED_TABLE, "view": SEEDED_VIEW}
        for key in case.path_parameters or {}:
            if key in names:
                case.path_parameters[key] = names[key]
        return case

    return rename


@pytest.mark.parametrize("operation", _operations(), ids=lambda op: op.label)
def test_spec_conformance(operation: Any, secure_catalog_server: SecureCatalogHandle,
                          rest_catalog: RestCatalog, seeded: str) -> None:
    # Valid requests, and requests that break the schema (the server must answer 4xx).
    strategy = st.one_of(
        operation.as_strategy(), operation.as_strategy(schemathesis.GenerationMode.NEGATIVE)
    )
    # Half of the requests name the seeded namespace/table, the other half random ones.
    cases = st.one_of(strategy, strategy.map(_naming_seeded(seeded)))
    # A fresh token per operation: a deep run outlasts one token's lifetime (an hour).
    headers = secure_catalog_server.headers(CLIENT)
    _reseed(rest_catalog, seeded)
    reseed = _destructive(operation)

    @given(case=cases)
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case: schemathesis.Case) -> None:
        if reseed:  # every example finds the seeded state, not only the first one
            _reseed(rest_catalog, seeded)
        case.call_and_validate(base_url=secure_catalog_server.uri, headers=headers,
                               checks=[counted, *CHECKS])

    (seed(int(FUZZ_SEED))(check) if FUZZ_SEED else check)()  # a seed overrides derandomize


def _load_table_case(namespace: str, table: str) -> schemathesis.Case:
    loaded = schemathesis.openapi.from_dict(without_prefix(_raw_spec()))
    operation = loaded["/v1/namespaces/{namespace}/tables/{table}"]["GET"]
    return operation.Case(path_parameters={"namespace": namespace, "table": table})


def test_the_harness_reaches_a_seeded_table(secure_catalog_server: SecureCatalogHandle,
                                            rest_catalog: RestCatalog) -> None:
    case = _load_table_case(_seed(rest_catalog), SEEDED_TABLE)
    response = case.call_and_validate(base_url=secure_catalog_server.uri,
                                      headers=secure_catalog_server.headers(CLIENT),
                                      checks=CHECKS)
    assert response.status_code == 200
    assert response.json()["metadata"]["current-snapshot-id"] is not None


def test_the_harness_fails_when_refused(secure_catalog_server: SecureCatalogHandle,
                                        seeded: str) -> None:
    # Without a token (or with a bad one) the server answers 401, which the spec allows:
    # only ``not_refused`` stops a fuzzer that never gets in from passing.
    case = _load_table_case(seeded, SEEDED_TABLE)
    uri = secure_catalog_server.uri
    with pytest.raises(FailureGroup, match="sent without a bearer token"):
        case.call_and_validate(base_url=uri, checks=CHECKS)
    with pytest.raises(FailureGroup, match="401 for a valid token"):
        case.call_and_validate(base_url=uri, headers={"Authorization": "Bearer x"},
                               checks=CHECKS)
    bad = case.call(base_url=uri, headers={"Authorization": "Bearer x"})
    case.validate_response(bad, checks=[not_a_server_error, response_schema_conformance])


def _answer(uri: str, code: int, body: dict) -> httpx.Response:
    response = httpx.Response(code, json=body, request=httpx.Request(
        "GET", f"{uri}/v1/x", headers={"Authorization": "Bearer t"}))
    response.elapsed = timedelta(0)
    return response


def test_the_checks_catch_a_bad_answer(secure_catalog_server: SecureCatalogHandle,
                                       seeded: str) -> None:
    case = _load_table_case(seeded, SEEDED_TABLE)
    uri = secure_catalog_server.uri
    bare = _answer(uri, 404, {"message": "m", "type": "NoSuchTable", "code": 404})
    with pytest.raises(FailureGroup, match="Response violates schema"):  # unwrapped ErrorModel
        case.validate_response(bare, checks=[response_schema_conformance])
    crash = _answer(uri, 500, {"error": {"message": "m", "type": "E", "code": 500}})
    with pytest.raises(FailureGroup, match="Server error"):
        case.validate_response(crash, checks=[not_a_server_error])
    refused = _answer(uri, 401, {"error": {"message": "m", "type": "E", "code": 401}})
    with pytest.raises(FailureGroup, match="401 for a valid token"):
        case.validate_response(refused, checks=[not_refused])
