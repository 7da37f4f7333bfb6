"""S3 remote signing: the ``remote-signing`` access delegation and ``signRequest``.

Implements spec 1.11.0 ``POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign``
(schemas ``RemoteSignRequest``, ``RemoteSignResult``; ``LoadTableResult`` "Remote Signing").
A client that sends ``X-Iceberg-Access-Delegation: remote-signing`` gets, in the table's
``config``, ``s3.remote-signing-enabled=true`` and the table's sign endpoint
(``signer.endpoint`` / ``s3.signer.endpoint``, relative to the catalog URI). It then holds no
S3 keys: before each S3 request it posts the request (method, URI, headers) to that endpoint
and sends the request with the headers it gets back.

The server signs with its own S3 credentials (``S3Settings``: the keys it writes metadata
with, or botocore's default chain) using botocore's SigV4 signer for S3, and only requests
that stay inside the table: objects under the table's location, listings whose ``prefix`` is
under it, ``DeleteObjects`` whose keys all are, in the table's bucket on the configured
endpoint, and only for tables inside the warehouse. Anything else is 403
``ForbiddenException``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.etree import ElementTree

import boto3
from botocore.auth import UNSIGNED_PAYLOAD, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from pyiceberg.catalog.rest import TableResponse
from pyiceberg.typedef import Identifier

from catalog_api.core.config import CatalogSettings
from catalog_api.credentials import S3_SCHEMES, CredentialVendingError
from catalog_api.errors import BadRequestError, ForbiddenError
from catalog_api.locations import is_within, roots_of
from catalog_api.models import RemoteSignBody

REMOTE_SIGNING = "remote-signing"
#: Request headers never passed to the signer (the signer sets its own).
_DROPPED = {"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}
_PAYLOAD_HASH = re.compile(r"^([0-9a-f]{64}|UNSIGNED-PAYLOAD|STREAMING-[A-Z0-9-]+)$")
#: Hosts of AWS's S3 service itself (no bucket in them): ``s3.amazonaws.com``,
#: ``s3.<region>.amazonaws.com``, ``s3-<region>.amazonaws.com``, ``s3.dualstack...``.
_AWS_S3_HOST = re.compile(r"^s3([.-][a-z0-9-]+)*\.amazonaws\.com(\.cn)?(:443)?$")
#: Query parameters of the requests a table's reader or writer makes: object reads and
#: writes, multipart uploads, listings, ``DeleteObjects``, ``GetBucketLocation``, and the
#: AWS SDK's ``x-id``. Any other sub-resource (``?acl``, ``?policy``, ``?tagging``...)
#: changes more than the table's data and is not signed.
_ALLOWED_QUERY = frozenset({
    "uploads", "uploadId", "partNumber", "versionId", "x-id", "list-type", "prefix",
    "delimiter", "continuation-token", "start-after", "max-keys", "encoding-type",
    "fetch-owner", "marker", "delete", "location",
})
#: Request headers that would make S3 read another object (``x-amz-copy-source``: checked
#: like the request's own key) or change who may access one (never signed).
_COPY_SOURCE = "x-amz-copy-source"
_ACCESS_HEADERS = ("x-amz-acl", "x-amz-grant-")


def wants_remote_signing(header: str | None) -> bool:
    """Tell whether an ``X-Iceberg-Access-Delegation`` value asks for remote signing.

    Args:
        header: The header's value: a comma-separated list of mechanisms, or None.
    """
    return REMOTE_SIGNING in {part.strip().lower() for part in (header or "").split(",")}


def sign_endpoint(identifier: Identifier) -> str:
    """The sign endpoint of a table, relative to the catalog base URI (spec path, no prefix).

    Args:
        identifier: Namespace parts followed by the table name.
    """
    namespace = "%1F".join(quote(part, safe="") for part in identifier[:-1])
    return f"v1/namespaces/{namespace}/tables/{quote(identifier[-1], safe='')}/sign"


class _PayloadS3SigV4Auth(S3SigV4Auth):
    """botocore's S3 SigV4 signer with a payload hash given by the client (no body here)."""

    def __init__(self, credentials: Any, region: str, payload_hash: str) -> None:
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash

    def payload(self, request: AWSRequest) -> str:
        """The ``X-Amz-Content-SHA256`` value: the client's, or ``UNSIGNED-PAYLOAD``."""
        return self._payload_hash


class RemoteSigner:
    """Signs S3 requests for clients, within one table's location.

    Args:
        settings: Service settings; signing is off unless ``settings.s3`` is set with
            ``remote_signing``.
    """

    def __init__(self, settings: CatalogSettings) -> None:
        self.s3 = settings.s3
        self.roots = roots_of(settings)
        self._credentials: Any = None
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether this server signs requests at all."""
        return self.s3 is not None and self.s3.remote_signing

    def applies(self, access_delegation: str | None) -> bool:
        """Whether a request with this ``X-Iceberg-Access-Delegation`` gets signer config."""
        return self.enabled and wants_remote_signing(access_delegation)

    def decorate(
        self, response: TableResponse, access_delegation: str | None, identifier: Identifier
    ) -> TableResponse:
        """Add the remote-signing ``config`` to a load/create/register-table answer, if asked.

        Args:
            response: The answer.
            access_delegation: The request's ``X-Iceberg-Access-Delegation`` header.
            identifier: The table's identifier (its sign endpoint).

        Returns:
            The answer with ``s3.remote-signing-enabled``, ``signer.endpoint`` (also as
            pyiceberg's and Java's ``s3.signer.endpoint``), the S3 endpoint and region; or
            unchanged when not asked or the table is not on S3.
        """
        location = response.metadata.location
        if self.s3 is None or not self.applies(access_delegation):
            return response
        if urlsplit(location).scheme not in S3_SCHEMES:
            return response
        endpoint = sign_endpoint(identifier)
        config = {"s3.remote-signing-enabled": "true", "signer.endpoint": endpoint,
                  "s3.signer.endpoint": endpoint, "s3.signer": "S3V4RestSigner",
                  "s3.region": self.s3.region, "client.region": self.s3.region}
        if self.s3.endpoint:
            config["s3.endpoint"] = self.s3.endpoint
        return response.model_copy(update={"config": {**config, **response.config}})

    def sign(self, table_location: str, request: RemoteSignBody) -> dict[str, Any]:
        """Sign one S3 request of a table's client (``signRequest``).

        Args:
            table_location: The table's location, ``s3://bucket/path``.
            request: The request to sign.

        Returns:
            The ``RemoteSignResult``: ``uri`` and every header to send, signature included.

        Raises:
            BadRequestError: If signing is off, the table is not on S3 or the provider is
                not ``s3``.
            ForbiddenError: If the request leaves the table's location, bucket or endpoint,
                or the table lies outside the warehouse.
            CredentialVendingError: If the server has no credentials to sign with (503).
        """
        if self.s3 is None or not self.s3.remote_signing:
            raise BadRequestError("Remote signing is not enabled on this catalog")
        if (request.provider or "s3").lower() != "s3":
            raise BadRequestError(f"Cannot sign for storage provider {request.provider!r}")
        location = urlsplit(table_location)
        if location.scheme not in S3_SCHEMES:
            raise BadRequestError(f"Table location {table_location} is not on S3")
        if not any(is_within(table_location, root) for root in self.roots):
            raise ForbiddenError("Not signing for a table outside the warehouse")
        key = _object_key(request.uri, location.netloc, self.s3.endpoint)
        _check_scope(request, key, location.path.strip("/"))
        _check_headers(request, location.netloc, location.path.strip("/"))
        return {"uri": request.uri, "headers": self._signed_headers(request)}

    def _signed_headers(self, request: RemoteSignBody) -> dict[str, list[str]]:
        headers = {name: ", ".join(values) for name, values in request.headers.items()
                   if name.lower() not in _DROPPED}
        given = [v for k, vs in request.headers.items()
                 if k.lower() == "x-amz-content-sha256" for v in vs]
        if given and _PAYLOAD_HASH.match(given[0]):
            payload = given[0]
        elif request.body is not None:
            payload = hashlib.sha256(request.body.encode()).hexdigest()
        else:
            payload = UNSIGNED_PAYLOAD
        signed = AWSRequest(method=request.method, url=request.uri, headers=headers)
        region = request.region or (self.s3.region if self.s3 else "us-east-1")
        _PayloadS3SigV4Auth(self._frozen_credentials(), region, payload).add_auth(signed)
        return {name: [value] for name, value in signed.headers.items()}

    def _frozen_credentials(self) -> Any:
        with self._lock:
            if self._credentials is None:
                s3 = self.s3
                assert s3 is not None
                session = boto3.Session(aws_access_key_id=s3.access_key_id,
                                        aws_secret_access_key=s3.secret_access_key,
                                        aws_session_token=s3.session_token,
                                        region_name=s3.region)
                self._credentials = session.get_credentials()
            if self._credentials is None:
                raise CredentialVendingError("The catalog has no S3 credentials to sign with")
            return self._credentials.get_frozen_credentials()


def _object_key(uri: str, bucket: str, endpoint: str | None) -> str:
    """The object key a request addresses in ``bucket`` ('' for the bucket itself).

    Path-style (``http://endpoint/bucket/key``) and virtual-hosted
    (``http://bucket.endpoint/key``) URIs are understood; the service host must be the
    configured endpoint's, or AWS's S3 service (``s3[.-]...amazonaws.com``, which names no
    bucket) when none is configured.

    Raises:
        ForbiddenError: If the URI addresses another bucket or host.
    """
    parts = urlsplit(uri)
    host, path = parts.netloc.lower(), unquote(parts.path)
    if parts.scheme not in ("http", "https"):
        raise ForbiddenError(f"Not an HTTP(S) URI: {uri}")
    if host.startswith(f"{bucket}."):
        service, key = host[len(bucket) + 1 :], path.lstrip("/")
    elif path == f"/{bucket}" or path.startswith(f"/{bucket}/"):
        service, key = host, path[len(bucket) + 2 :]
    else:
        raise ForbiddenError(f"{uri} is not in the table's bucket {bucket}")
    allowed = urlsplit(endpoint).netloc.lower() if endpoint else None
    if (service != allowed) if allowed else not _AWS_S3_HOST.match(service):
        raise ForbiddenError(f"{uri} is not on the warehouse's S3 endpoint")
    return key


def _inside(key: str, table_path: str) -> bool:
    """Whether an object key is under the table's path (no ``.``/``..`` segments)."""
    if any(part in (".", "..") for part in key.split("/")):
        return False
    return key == table_path or key.startswith(f"{table_path}/")


def _check_headers(request: RemoteSignBody, bucket: str, table_path: str) -> None:
    """Refuse a copy from outside the table and any change of access rights.

    Raises:
        ForbiddenError: If ``x-amz-copy-source`` names an object outside the table, or an
            ``x-amz-acl``/``x-amz-grant-*`` header is present.
    """
    for name, values in request.headers.items():
        lowered = name.lower()
        if lowered.startswith(_ACCESS_HEADERS):
            raise ForbiddenError(f"Not signing a request that sets access rights ({name})")
        if lowered == _COPY_SOURCE:
            source = unquote(urlsplit(values[0] if values else "").path).lstrip("/")
            source_bucket, _, source_key = source.partition("/")
            if source_bucket != bucket or not _inside(source_key, table_path):
                raise ForbiddenError(f"Not signing a copy from outside the table ({name})")


def _check_scope(request: RemoteSignBody, key: str, table_path: str) -> None:
    """Allow object requests under the table, and bucket requests confined to it.

    Raises:
        ForbiddenError: If the request reaches outside the table's location, or names a
            sub-resource other than those of :data:`_ALLOWED_QUERY`.
    """
    query = parse_qs(urlsplit(request.uri).query, keep_blank_values=True)
    unknown = sorted(set(query) - _ALLOWED_QUERY)
    if unknown:
        raise ForbiddenError(f"Not signing a request for the sub-resource {unknown[0]!r}")
    if key:
        allowed = _inside(key, table_path)
    elif request.method == "POST" and "delete" in query:  # DeleteObjects: keys in the body
        keys = _deleted_keys(request.body)
        allowed = bool(keys) and all(_inside(k, table_path) for k in keys)
    elif request.method in ("GET", "HEAD") and ("prefix" in query or "list-type" in query):
        prefix = query.get("prefix", [""])[0]  # "t/" lists t's objects, "t" also t2's
        allowed = prefix.startswith(f"{table_path}/") and _inside(prefix, table_path)
    else:  # HeadBucket, GetBucketLocation
        allowed = request.method == "HEAD" or (request.method == "GET" and "location" in query)
    if not allowed:
        raise ForbiddenError(f"Not signing {request.method} {request.uri}: outside the table")


def _deleted_keys(body: str | None) -> list[str]:
    """The object keys of a ``DeleteObjects`` XML body (none when absent or unreadable)."""
    if not body:
        return []
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return []
    return [element.text or "" for element in root.iter() if element.tag.endswith("Key")]
