"""The Celery app. Without CELERY_BROKER_URL it uses a broker-less filesystem transport
(the embedded default); with it, a real broker such as Redis."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxadmin.settings")

app = Celery("ctxadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
