"""Importing recorded agent traces as threads (docs/api.md, "Import formats" and
"Imports — `/api/v1/imports/`", docs/imports.md, "Imports of recorded traces").

Events go through the normal append path (event_append_batch) in batches: the same validation,
binding, hashing and token counting as the API. Every event gets the client_event_id
`import-<index>`, so importing the same file again appends nothing, and importing a longer
version of a conversation appends only what is new. Reading and converting the formats is
integrations.trace_imports.readers' job.

An upload (dashboard or API) is a TraceImport: `import_start` stores the file and queues the
`ctxadmin.import_trace` task, whose `import_run` imports it conversation by conversation,
recording each one's outcome as it goes; a conversation that cannot be imported is refused
with its position and reason, and the rest of the file still imports. The task runs on the
`imports` queue (CELERY_TASK_ROUTES), away from folds and verification.

Limits (docs/api.md, "Imports — `/api/v1/imports/`"): the upload's bytes and what they unpack to,
the conversations in the file and the events they convert to (CTXADMIN_MAX_IMPORT_*). Past one, the
import ends `failed` with the limit named; the events limit stops before the conversation that would
cross it, so what was imported is exactly the report's lines. An admin's cancel stops the import the
same way, between two conversations, and ends it `cancelled`.

The two steps are modules of this package: conversations (importing conversations, one thread
each) and uploads (the TraceImport, its task and report, its cancel, and who may upload).
"""
