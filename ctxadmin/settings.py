"""ctxadmin settings: one file, configured by environment variables (docs/api.md, "Configuration").

Safe defaults run on one machine with no services: SQLite in WAL mode with IMMEDIATE
transactions, and Celery over a filesystem transport. Production sets DATABASE_URL to
PostgreSQL and CELERY_BROKER_URL to Redis.
"""

import os
from datetime import timedelta
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("CTXADMIN_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()

DEBUG = env.bool("DJANGO_DEBUG", default=True)
_INSECURE_DEV_KEY = "django-insecure-ctxadmin-development-only-never-in-production"
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=_INSECURE_DEV_KEY if DEBUG else "")
if not SECRET_KEY:
    raise environ.ImproperlyConfigured("DJANGO_SECRET_KEY is required when DJANGO_DEBUG=0")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "axes",
    "csp",
    "threads",
    # Integrations register with the core's hooks; the core imports none of them.
    "integrations.langgraph_checkpointer",
    "integrations.trace_imports",
    "sample_data",
]

MIDDLEWARE = [
    # First: a request target too long for the contract is answered 414 before anything runs.
    "threads.middleware.RequestTargetLimitMiddleware",
    # Requests a proxy forwarded while no proxy is trusted: counted, logged once.
    "threads.middleware.ForwardedWithoutTrustedProxyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # API answers and signed-in pages: Cache-Control private, no-cache (threads/middleware.py).
    "threads.middleware.PrivateCacheMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "threads.middleware.MethodNotAllowedPageMiddleware",
    # DEBUG on (the demo): the product's 404, 400 and 500 pages, not Django's debug pages.
    "threads.middleware.ProductNotFoundPageMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
    # Innermost, so it sees a view's exception first: a database that refuses writes is a 503.
    "threads.middleware.DatabaseUnavailableMiddleware",
]

# Login throttling (django-axes; docs/access.md, "People and access"): failed logins are counted per
# username and client address; at the limit that pair is locked, the right password included, until
# the cool-off has passed. The axes backend comes first so a locked-out pair never reaches the
# password check.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
CTXADMIN_LOGIN_FAILURE_LIMIT = env.int("CTXADMIN_LOGIN_FAILURE_LIMIT", default=5)
CTXADMIN_LOGIN_COOLOFF_MINUTES = env.int("CTXADMIN_LOGIN_COOLOFF_MINUTES", default=15)
# How many proxies in front of ctxadmin append to X-Forwarded-For; 0 (the default) ignores
# the header, which a client can set to anything, and counts by REMOTE_ADDR. One notion of the
# client's address for the login throttle, /metrics and rate limits: threads/client_address.py.
CTXADMIN_TRUSTED_PROXIES = env.int("CTXADMIN_TRUSTED_PROXIES", default=0)
AXES_FAILURE_LIMIT = CTXADMIN_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=CTXADMIN_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "threads.client_address.client_address"
AXES_LOCKOUT_CALLABLE = "threads.views.login_throttle.locked_out"
AXES_VERBOSE = False

ROOT_URLCONF = "ctxadmin.urls"
WSGI_APPLICATION = "ctxadmin.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "threads.views.context_processors.memberships",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'ctxadmin.sqlite3'}")
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the dashboard read while an agent writes; IMMEDIATE takes the write lock at
    # BEGIN, which is how event numbering is serialised per database on SQLite.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        # How long a write waits for another process's write lock before it gives up with a
        # 503 database_unavailable (docs/api.md, "Codes"): under gunicorn's 30 s worker timeout,
        # so a held lock answers 503 rather than a killed worker.
        "timeout": env.float("CTXADMIN_SQLITE_BUSY_TIMEOUT", default=20.0),
        "init_command": (
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
        ),
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
    # PostgreSQL's JIT compiles the dashboard's budget and problem-flag queries for longer than
    # they run (20-25 ms a query, measured by bench/pages.py); short OLTP queries never gain.
    # A DSN that sets its own `options` keeps them.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("options", "-c jit=off")
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A streaming read replica serves the dashboard's GET pages (ctxadmin/db_router.py,
# docs/scale.md, "Past one machine"); unset, everything reads the primary.
CTXADMIN_REPLICA_PIN_SECONDS = env.int("CTXADMIN_REPLICA_PIN_SECONDS", default=5)
# Past this lag (seconds behind the primary) pages read the primary; the replica's lag and
# reachability are checked at most once per CTXADMIN_REPLICA_CHECK_SECONDS per process.
CTXADMIN_REPLICA_MAX_LAG_SECONDS = env.float("CTXADMIN_REPLICA_MAX_LAG_SECONDS", default=10.0)
CTXADMIN_REPLICA_CHECK_SECONDS = env.float("CTXADMIN_REPLICA_CHECK_SECONDS", default=5.0)
if env.str("CTXADMIN_REPLICA_URL", default=""):
    DATABASES["replica"] = env.db_url("CTXADMIN_REPLICA_URL")
    DATABASES["replica"].setdefault("CONN_MAX_AGE", 60)
    DATABASES["replica"].setdefault("OPTIONS", {}).setdefault("options", "-c jit=off")
    # A blackholed replica host fails a page's check in seconds, not at the TCP timeout.
    DATABASES["replica"]["OPTIONS"].setdefault(
        "connect_timeout", env.int("CTXADMIN_REPLICA_CONNECT_TIMEOUT", default=2)
    )
    DATABASES["replica"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    DATABASE_ROUTERS = ["ctxadmin.db_router.ReplicaRouter"]
    MIDDLEWARE.insert(1, "ctxadmin.db_router.ReplicaReadsMiddleware")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/threads/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- Security (check --deploy clean with DJANGO_DEBUG=0) ------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
CSRF_FAILURE_VIEW = "threads.api.errors.csrf_failure"  # JSON under /api/, the page elsewhere
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# A scraper on this machine reads /metrics from gunicorn over plain HTTP: it is never sent to
# https:// (without a token, /metrics answers only unforwarded loopback requests anyway).
SECURE_REDIRECT_EXEMPT = [r"^metrics/?$"]
if not DEBUG:
    SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# Content Security Policy (django-csp; docs/dashboard.md, "Dashboard"): scripts only from this
# origin, never inline or evaluated, so agent text that slips past escaping still cannot run. htmx
# runs with allowEval off and without its injected indicator <style> (base.html's htmx-config).
# Styles:
# <style> elements only from files; style="" attributes are allowed (style-src-attr), because
# bars and meters set their width from data. /api/docs/ relaxes style-src-elem for the one
# inline <style> of Swagger UI (ctxadmin/urls.py); its scripts are files there too.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-elem": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Per-process unless CTXADMIN_CACHE_URL names a shared cache (e.g. redis://host:6379/1): the
# API's rate limits count in the cache, so with the local-memory default each worker process
# counts for itself.
CACHES = {"default": env.cache_url("CTXADMIN_CACHE_URL", default="locmemcache://ctxadmin")}

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "threads.api.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["threads.api.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "threads.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "threads.api.schema.ViewScopedAutoSchema",
    "UNAUTHENTICATED_USER": None,
    # Per API key, and per person for session calls (threads/api/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["threads.api.throttling.ApiRateThrottle"],
}
# Requests per API key (or person) and period: "1200/min", "50/s", "10000/hour"; 0 or empty
# turns the limit off. Over it: 429 rate_limited with Retry-After (docs/api.md, "Codes").
CTXADMIN_API_RATE = env.str("CTXADMIN_API_RATE", default="1200/min")
SPECTACULAR_SETTINGS = {
    "TITLE": "ctxadmin API",
    "DESCRIPTION": "Event log, working context, summaries, checkpoints and repairs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "threads.api.schema_contract.contract_hook",
        "integrations.langgraph_checkpointer.api.schema.schema_hook",
        "integrations.trace_imports.schema.schema_hook",
    ],
    # Several enums share a field name ("state"): name these after what they are.
    "ENUM_NAME_OVERRIDES": {
        "ImportStateEnum": "integrations.trace_imports.models.ImportState",
        "TaskStateEnum": "threads.models.TaskState",
    },
}

# --- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
if not CELERY_BROKER_URL:
    # Embedded default: a broker-less filesystem queue that the demo's worker reads.
    _queue = VAR_DIR / "celery"
    for _sub in ("in", "processed", "control"):
        (_queue / _sub).mkdir(parents=True, exist_ok=True)
    # A host that the transport ignores: without one, kombu warns on every connection.
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue / "in"),
        "data_folder_out": str(_queue / "in"),
        "processed_folder": str(_queue / "processed"),
        "control_folder": str(_queue / "control"),
        "store_processed": False,
    }
else:
    # A message a worker took and never acknowledged (it was killed) goes back to the queue
    # after this many seconds. It must exceed the longest task (an import: 31 min), or a
    # running task is delivered twice; tasks are idempotent, so a short one costs only work.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CTXADMIN_BROKER_VISIBILITY_TIMEOUT", default=3600)
    }
# Sending a task after commit waits this long for a broker that is restarting (about 20 s in
# all) instead of failing the request that already committed.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 12,
    "interval_start": 0.2,
    "interval_step": 0.5,
    "interval_max": 2.0,
}
CELERY_TASK_ALWAYS_EAGER = env.bool("CTXADMIN_TASKS_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True  # task state lives in the TaskRun table, not a result backend
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Imports run on a queue of their own, so a long one never holds up folds, verification or
# recovery (docs/operations.md, "Redis and Celery"): start a worker with `-Q imports` beside the
# one(s) on the default queue `celery`.
CELERY_TASK_ROUTES = {"ctxadmin.import_trace": {"queue": "imports"}}
# Signed chain heads are published this often (seconds; docs/repairs.md, "Published chain heads").
CTXADMIN_HEADS_PERIOD = timedelta(seconds=env.int("CTXADMIN_HEADS_PERIOD", default=600))
CELERY_BEAT_SCHEDULE = {
    "recover-prepared-versions": {
        "task": "ctxadmin.recover_prepared",
        "schedule": timedelta(minutes=1),
    },
    "integrity-sweep": {
        "task": "ctxadmin.integrity_sweep",
        "schedule": timedelta(minutes=10),
    },
    "publish-chain-heads": {
        "task": "ctxadmin.publish_chain_heads",
        "schedule": CTXADMIN_HEADS_PERIOD,
    },
    "prune-context-log": {
        "task": "ctxadmin.prune_context_log",
        "schedule": timedelta(hours=1),
    },
    # Workspaces' retention policies (docs/operations.md, "Retention").
    "apply-retention": {
        "task": "ctxadmin.apply_retention",
        "schedule": timedelta(hours=1),
    },
}

# --- ctxadmin -------------------------------------------------------------------------------
CTXADMIN_CHAIN_KEY = env.str("CTXADMIN_CHAIN_KEY", default="")
# Keys by id, "id1:key1,id2:key2", the first is current; CTXADMIN_CHAIN_KEY is the key "k0"
# (threads/keys/chain.py, docs/event-log.md, "Hash chain and canonical JSON").
CTXADMIN_CHAIN_KEYS = env.str("CTXADMIN_CHAIN_KEYS", default="")
# Signed chain heads, outside the database (docs/repairs.md, "Published chain heads"): where they
# are appended and the Ed25519 private key (PEM) that signs them.
CTXADMIN_HEADS_DIR = Path(env.str("CTXADMIN_HEADS_DIR", default=str(VAR_DIR / "chain-heads")))
CTXADMIN_HEADS_SIGNING_KEY = env.str("CTXADMIN_HEADS_SIGNING_KEY", default="")
# Threads (and threads' checkpoints) a retention batch deletes in one transaction
# (docs/operations.md, "Retention").
CTXADMIN_RETENTION_BATCH = env.int("CTXADMIN_RETENTION_BATCH", default=100)
CTXADMIN_MAX_EVENT_BYTES = env.int("CTXADMIN_MAX_EVENT_BYTES", default=1024 * 1024)
CTXADMIN_MAX_BATCH_EVENTS = 1000
CTXADMIN_MAX_JSON_DEPTH = env.int("CTXADMIN_MAX_JSON_DEPTH", default=64)
# Scan every appended event's text for secrets (API keys, private keys, passwords in URLs) and
# flag the events that hold one (docs/event-log.md, "Secrets at ingest"); 0 turns it off.
CTXADMIN_DETECT_SECRETS = env.bool("CTXADMIN_DETECT_SECRETS", default=True)
# Every thread's chain is walked from genesis once per this period by the integrity sweep
# (seconds; default a day): the incremental checks never re-read an event they verified.
CTXADMIN_FULL_VERIFY_PERIOD = timedelta(
    seconds=env.int("CTXADMIN_FULL_VERIFY_PERIOD", default=24 * 3600)
)
# A task still PENDING after this many seconds: no worker has taken it. Progress regions say so
# and stop polling (a web process started without a worker would otherwise poll forever).
CTXADMIN_TASK_PICKUP_WARNING = env.int("CTXADMIN_TASK_PICKUP_WARNING", default=30)
CTXADMIN_LLM_BASE_URL = env.str("CTXADMIN_LLM_BASE_URL", default="")
CTXADMIN_LLM_MODEL = env.str("CTXADMIN_LLM_MODEL", default="")
CTXADMIN_LLM_API_KEY = env.str("CTXADMIN_LLM_API_KEY", default="")
# tiktoken reads its cache folder from the environment; ctxadmin seeds it from bundled files.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(VAR_DIR / "tiktoken"))
# Prepare the append path's statements (the thread's lock, the events' INSERT) on the server
# (psycopg). Turn off behind a pooler in transaction mode that cannot keep prepared statements
# (PgBouncer before 1.21).
CTXADMIN_PREPARED_STATEMENTS = env.bool("CTXADMIN_PREPARED_STATEMENTS", default=True)
CTXADMIN_PREPARED_TIMEOUT = timedelta(seconds=env.int("CTXADMIN_PREPARED_TIMEOUT", default=120))
# /metrics (docs/operations.md): a Bearer token when set; unset, only loopback may read it.
CTXADMIN_METRICS_TOKEN = env.str("CTXADMIN_METRICS_TOKEN", default="")
# prometheus-client's multiprocess mode (docs/operations.md, "Metrics"): the library writes
# into the directory from the first import of a histogram and never creates it, so a missing
# one would fail every process at import with a FileNotFoundError. Say what to do instead.
_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if _MULTIPROC_DIR and not (os.path.isdir(_MULTIPROC_DIR) and os.access(_MULTIPROC_DIR, os.W_OK)):
    raise environ.ImproperlyConfigured(
        f"PROMETHEUS_MULTIPROC_DIR={_MULTIPROC_DIR!r} is not a writable directory: create it "
        "(empty, emptied at each deploy) before starting the web processes, or unset it "
        '(docs/operations.md, "Metrics")'
    )
# How long context requests are kept for the Operations page (days).
CTXADMIN_CONTEXT_LOG_DAYS = env.int("CTXADMIN_CONTEXT_LOG_DAYS", default=7)
# The whole request: a full batch of events at the per-event limit, with some slack.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("CTXADMIN_MAX_REQUEST_BYTES", default=32 * 1024 * 1024)
# An uploaded trace file (docs/api.md, "Imports — `/api/v1/imports/`"), kept in the database until
# its import has run, and what a gzipped one may unpack to.
CTXADMIN_MAX_IMPORT_BYTES = env.int("CTXADMIN_MAX_IMPORT_BYTES", default=50 * 1024 * 1024)
CTXADMIN_MAX_IMPORT_UNPACKED_BYTES = env.int(
    "CTXADMIN_MAX_IMPORT_UNPACKED_BYTES", default=512 * 1024 * 1024
)
# Per import: how many conversations a file may hold and how many events they may convert to
# (docs/api.md, "Imports — `/api/v1/imports/`"). Past either, the import ends `failed` with the
# limit named: a file over the conversations limit imports nothing; the events limit stops before
# the conversation that would cross it.
CTXADMIN_MAX_IMPORT_CONVERSATIONS = env.int("CTXADMIN_MAX_IMPORT_CONVERSATIONS", default=10_000)
CTXADMIN_MAX_IMPORT_EVENTS = env.int("CTXADMIN_MAX_IMPORT_EVENTS", default=1_000_000)

_LOG_LEVEL = env.str("CTXADMIN_LOG_LEVEL", default="WARNING")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"refusals": {"()": "ctxadmin.log_filters.RefusalsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["refusals"]}},
    "root": {"handlers": ["console"], "level": _LOG_LEVEL},
    # Django's own logger loses its default handler (console, in DEBUG), which beside the
    # root's printed every request warning twice: its records reach the root's, once.
    "loggers": {"django": {"handlers": [], "level": _LOG_LEVEL, "propagate": True}},
}
