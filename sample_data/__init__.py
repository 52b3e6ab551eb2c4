"""The demo's sample data (see apps.py)."""
