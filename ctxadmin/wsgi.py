import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxadmin.settings")
application = get_wsgi_application()

# What start-up loaded lives as long as the process: move it out of the garbage collector's
# reach, so that full collections during requests (a batch of events allocates tens of
# thousands of objects) do not scan it again and again, and pages stay shared after a fork.
gc.collect()
gc.freeze()
