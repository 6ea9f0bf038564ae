"""The HTTP API and web page of an index (`pamir serve`)."""

from .app import create_app

__all__ = ["create_app"]
