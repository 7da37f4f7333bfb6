"""Credential vending for ``s3://`` tables through STS.

Implements the ``vended-credentials`` access delegation of the REST spec (1.11.0,
components/parameters/data-access, schemas StorageCredential, LoadTableResult,
LoadCredentialsResponse): when a client sends ``X-Iceberg-Access-Delegation:
vended-credentials``, load/create/register-table answers carry ``storage-credentials`` (one
per table location prefix) with temporary keys from STS ``AssumeRole`` or, with no role
configured, ``GetFederationToken``; and ``config`` carries the ``s3.endpoint`` / region
clients need. Either way a session policy limits the keys to the table's own location, and
to reading unless the caller holds the writer role on the table's namespace.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from pyiceberg.catalog.rest import TableResponse
from pyiceberg.catalog.rest.scan_planning import StorageCredential

from catalog_api.core.config import CatalogSettings, S3Settings
from catalog_api.errors import CatalogError

ACCESS_DELEGATION_HEADER = "X-Iceberg-Access-Delegation"
VENDED_CREDENTIALS = "vended-credentials"
S3_SCHEMES = ("s3", "s3a", "s3n")
#: Cached credentials are reused while at least this fraction of their lifetime remains.
REUSE_FRACTION = 0.5
READ_ACTIONS = ("s3:GetObject",)
WRITE_ACTIONS = (*READ_ACTIONS, "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload")


class CredentialVendingError(CatalogError):
    """STS did not issue credentials (503: the client may retry)."""

    code = 503
    error_type = "ServiceUnavailableException"


def wants_vended_credentials(header: str | None) -> bool:
    """Tell whether an ``X-Iceberg-Access-Delegation`` value asks for vended credentials.

    Args:
        header: The header's value: a comma-separated list of mechanisms, or None.
    """
    return VENDED_CREDENTIALS in {part.strip().lower() for part in (header or "").split(",")}


def session_policy(location: str, writable: bool = True) -> str:
    """An IAM session policy allowing object access under one S3 location only.

    Args:
        location: ``s3://bucket/prefix`` of a table.
        writable: Allow writing and deleting objects too; reading only when false.

    Returns:
        The policy document as JSON.
    """
    parsed = urlparse(location)
    bucket, prefix = parsed.netloc, parsed.path.strip("/")
    objects = f"arn:aws:s3:::{bucket}/{prefix}/*" if prefix else f"arn:aws:s3:::{bucket}/*"
    listing: dict[str, Any] = {
        "Effect": "Allow",
        "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
        "Resource": [f"arn:aws:s3:::{bucket}"],
    }
    if prefix:
        listing["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}}
    actions = list(WRITE_ACTIONS if writable else READ_ACTIONS)
    document = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": [objects]}, listing],
    }
    return json.dumps(document)


@dataclass(frozen=True)
class _Issued:
    config: dict[str, str]
    expires_at_s: float
    issued_at_s: float


class CredentialVendor:
    """Issues temporary S3 credentials for table locations.

    Args:
        settings: Service settings; vending is off unless ``settings.s3`` is set with
            ``vend_credentials``.
    """

    def __init__(self, settings: CatalogSettings) -> None:
        self.s3: S3Settings | None = settings.s3
        self._cache: dict[tuple[str, bool], _Issued] = {}
        self._lock = threading.Lock()
        self._sts: Any = None

    @property
    def enabled(self) -> bool:
        """Whether this server vends credentials at all."""
        return self.s3 is not None and self.s3.vend_credentials

    def applies(self, access_delegation: str | None) -> bool:
        """Whether a request with this ``X-Iceberg-Access-Delegation`` gets per-request content.

        Such answers are built for the request (fresh credentials): never from a cache shared
        across requests, never a 304.
        """
        return self.enabled and wants_vended_credentials(access_delegation)

    def client_config(self) -> dict[str, str]:
        """Table ``config`` entries clients need to reach the storage (endpoint, region, style)."""
        if self.s3 is None:
            return {}
        config = {"s3.region": self.s3.region, "client.region": self.s3.region,
                  "s3.path-style-access": str(self.s3.path_style).lower()}
        if self.s3.endpoint:
            config["s3.endpoint"] = self.s3.endpoint
        return config

    def _client(self, s3: S3Settings) -> Any:
        if self._sts is None:
            self._sts = boto3.client(
                "sts",
                endpoint_url=s3.sts_endpoint,
                region_name=s3.region,
                aws_access_key_id=s3.access_key_id,
                aws_secret_access_key=s3.secret_access_key,
                aws_session_token=s3.session_token,
            )
        return self._sts

    def _issue(self, s3: S3Settings, location: str, writable: bool) -> _Issued:
        client = self._client(s3)
        lifetime = s3.credentials_lifetime_s
        policy = session_policy(location, writable)
        try:
            if s3.role_arn:
                answer = client.assume_role(
                    RoleArn=s3.role_arn,
                    RoleSessionName=f"iceberg-catalog-{int(time.time())}",
                    DurationSeconds=lifetime,
                    Policy=policy,
                )
            else:
                answer = client.get_federation_token(
                    Name=f"iceberg-{'rw' if writable else 'ro'}", Policy=policy,
                    DurationSeconds=lifetime)
        except (BotoCoreError, ClientError) as exc:
            raise CredentialVendingError(f"STS did not issue credentials: {exc}") from exc
        credentials = answer["Credentials"]
        expires_at_s = credentials["Expiration"].timestamp()
        config = {
            "s3.access-key-id": credentials["AccessKeyId"],
            "s3.secret-access-key": credentials["SecretAccessKey"],
            "s3.session-token": credentials["SessionToken"],
            "s3.session-token-expires-at-ms": str(int(expires_at_s * 1000)),
        }
        return _Issued(config, expires_at_s, time.time())

    def storage_credentials(
        self, location: str | None, writable: bool = False
    ) -> list[StorageCredential]:
        """Temporary credentials for one table location (cached while fresh).

        Args:
            location: The table's location; only ``s3://`` (``s3a``, ``s3n``) locations get
                credentials.
            writable: Credentials that may also write and delete under the location.

        Returns:
            One ``StorageCredential`` whose prefix is the location, or none when vending is
            off or the location is not on S3.

        Raises:
            CredentialVendingError: If STS fails.
        """
        s3 = self.s3
        if s3 is None or not s3.vend_credentials or not location:
            return []
        if urlparse(location).scheme not in S3_SCHEMES:
            return []
        prefix = location.rstrip("/")
        with self._lock:
            issued = self._cache.get((prefix, writable))
            now = time.time()
            if issued is None or now > issued.expires_at_s - REUSE_FRACTION * (
                issued.expires_at_s - issued.issued_at_s
            ):
                issued = self._issue(s3, prefix, writable)
                self._cache[(prefix, writable)] = issued
        return [StorageCredential(prefix=prefix, config=dict(issued.config))]

    def decorate(
        self, response: TableResponse, access_delegation: str | None, writable: bool = False
    ) -> TableResponse:
        """Add vended credentials and storage config to a load-table answer, when asked.

        Args:
            response: The answer of load/create/register-table.
            access_delegation: The request's ``X-Iceberg-Access-Delegation`` header.
            writable: The caller may write the table (else the keys only read).

        Returns:
            The answer with ``storage-credentials`` and ``config`` filled in, or unchanged
            when the client did not ask or vending does not apply.

        Raises:
            CredentialVendingError: If STS fails.
        """
        if not self.applies(access_delegation):
            return response
        credentials = self.storage_credentials(response.metadata.location, writable)
        if not credentials:
            return response
        config = {**self.client_config(), **response.config}
        return response.model_copy(update={"config": config, "storage_credentials": credentials})
