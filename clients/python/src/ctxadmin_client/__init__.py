"""ctxadmin's Python client: an agent's events in, its working context out."""
