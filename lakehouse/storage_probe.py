"""Check the warehouse's storage before anything starts: one line naming the setting at fault.

A local warehouse folder is created. For an ``s3://`` warehouse, one ``HeadBucket`` request
(boto3, with the standard AWS credential chain) tells a wrong endpoint, a missing bucket,
missing or refused credentials and a wrong region apart, before the catalog, Spark or a
library deep inside a tick meets them with a stack trace.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from catalog_api.core.config import S3Settings
from lakehouse.config import Config
from lakehouse.errors import StorageError
from lakehouse.storage import ENDPOINT_VARIABLES, is_s3, storage_s3

if TYPE_CHECKING:
    from botocore.exceptions import ClientError

__all__ = ["prepare_warehouse"]

PROBE_TIMEOUT_S = 10
NO_CREDENTIALS = ("no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                  "(and AWS_SESSION_TOKEN), or AWS_PROFILE")


def prepare_warehouse(config: Config) -> None:
    """Create a local warehouse folder, or check that an S3 warehouse's bucket answers.

    Args:
        config: The validated configuration.

    Raises:
        StorageError: The endpoint does not answer, the bucket does not exist, no
            credentials are found or they are refused, or the region is wrong.
    """
    if config.warehouse_is_local:
        config.warehouse_path.mkdir(parents=True, exist_ok=True)
        return
    s3 = storage_s3(config)
    if s3 is not None and is_s3(config.warehouse):
        _head_bucket(config, s3)


def _endpoint_key(config: Config) -> str:
    """The setting the endpoint came from: ``catalog.s3.endpoint`` or an AWS variable."""
    if config.catalog.s3 is not None and config.catalog.s3.endpoint:
        return "catalog.s3.endpoint"
    return next((v for v in ENDPOINT_VARIABLES if os.environ.get(v)), "catalog.s3.endpoint")


def _client(config: Config, s3: S3Settings) -> Any:
    import boto3  # only for an S3 warehouse
    from botocore.config import Config as BotoConfig
    from botocore.exceptions import ProfileNotFound

    try:
        session = boto3.session.Session()
    except ProfileNotFound as error:
        raise StorageError(f"{error.kwargs.get('profile')!r}: no such profile",
                           key="AWS_PROFILE") from None
    if session.get_credentials() is None:
        raise StorageError(f"{config.warehouse}: {NO_CREDENTIALS}", key="warehouse") from None
    style = "path" if s3.path_style else "virtual"
    return session.client("s3", endpoint_url=s3.endpoint, region_name=s3.region, config=BotoConfig(
        s3={"addressing_style": style}, connect_timeout=PROBE_TIMEOUT_S,
        read_timeout=PROBE_TIMEOUT_S, retries={"max_attempts": 2}))


def _head_bucket(config: Config, s3: S3Settings) -> None:
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
    )
    from botocore.exceptions import ConnectionError as BotoConnectionError

    bucket = urlparse(config.warehouse).netloc
    client = _client(config, s3)
    where = s3.endpoint or "AWS S3"
    try:
        client.head_bucket(Bucket=bucket)
    except (EndpointConnectionError, BotoConnectionError):
        raise StorageError(f"{where}: cannot connect", key=_endpoint_key(config)) from None
    except NoCredentialsError:
        raise StorageError(f"{config.warehouse}: {NO_CREDENTIALS}", key="warehouse") from None
    except ClientError as error:
        raise _refusal(config, s3, bucket, error) from None
    except BotoCoreError as error:
        raise StorageError(f"{where}: no S3 answer ({type(error).__name__})",
                           key=_endpoint_key(config)) from None


def _refusal(config: Config, s3: S3Settings, bucket: str, error: ClientError) -> StorageError:
    """The error for a ``HeadBucket`` the endpoint answered with an HTTP error."""
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    where = s3.endpoint or "AWS S3"
    if status == 404:
        return StorageError(f"{config.warehouse}: no bucket {bucket!r} at {where}",
                            key="warehouse")
    if status == 403:
        return StorageError(f"{config.warehouse}: access to bucket {bucket!r} denied (HTTP "
                            "403); check the AWS credentials", key="warehouse")
    code = error.response.get("Error", {}).get("Code")
    if status == 301 or code == "AuthorizationHeaderMalformed":
        return StorageError(f"{s3.region}: bucket {bucket!r} is in another region",
                            key="catalog.s3.region")
    return StorageError(f"{where}: does not answer as S3 (HTTP {status})",
                        key=_endpoint_key(config))
