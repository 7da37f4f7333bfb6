"""Core pieces of the catalog service: settings."""
