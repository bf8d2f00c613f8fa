"""Integrations with other Django packages, each in its own subpackage (imported only when used)."""
