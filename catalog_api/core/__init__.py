"""Core pieces of the catalog service: settings, and where the API is mounted."""

#: Where the REST API is mounted: clients use ``http://host:port/iceberg`` as base URI.
API_PREFIX = "/iceberg"
