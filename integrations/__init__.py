"""Integrations: Django apps that connect an agent framework or a file format to the core
(`threads`). Each registers with the core's hooks in its `AppConfig.ready()`; the core imports
none of them (an import-linter contract in pyproject.toml)."""
