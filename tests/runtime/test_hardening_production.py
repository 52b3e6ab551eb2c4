"""Issue #27's six hardening items as a deployment meets them: on the production settings (DEBUG
off, HTTPS redirect, TLS ended at a proxy that sets X-Forwarded-Proto, secure cookies, HSTS, a
metrics token; the `production` fixture of tests/conftest.py), with every request arriving the
way a TLS-terminating proxy on this machine hands it over (REMOTE_ADDR loopback,
X-Forwarded-Proto https, the client in X-Forwarded-For) and one proxy trusted, unless an item is
about the token's absence or an untrusted proxy.

The first test proves these settings are live: a plain HTTP request is redirected to HTTPS,
and the proxied requests the other tests send are not. Then, per item: imports (who may, the
conversations limit, an admin's cancel), /metrics behind the proxy with and without a token,
LangGraph checkpoint ids a URL cannot reach, the 414 for an over-long request target, an import
report that names every item it left out, and the login lockout with and without a trusted
proxy (the fault CTXADMIN_TRUSTED_PROXIES=0 causes, and the three places that show it).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from integrations.trace_imports.models import ImportState, TraceImport
from integrations.trace_imports.services import uploads as import_service
from tests import factories as f
from tests.conftest import PRODUCTION_METRICS_TOKEN as TOKEN
from threads.middleware import MAX_REQUEST_TARGET
from threads.models import AuditEntry, Event, Thread, Workspace

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("production", "eager_tasks", "no_fold_triggers"),
]

ORIGIN = "https://testserver"  # what a browser on the proxy's HTTPS origin sends
LOGIN = "/accounts/login/"
IMPORTS = "/api/v1/imports/"
LIMIT = 5  # CTXADMIN_LOGIN_FAILURE_LIMIT's default
UNTRUSTED = "ctxadmin_untrusted_forwarded_requests"
NOTICE = "This page came through a proxy that ctxadmin does not trust"
GOOD_CHECKPOINT = "1f0c4a2e-6a1b-6d2c-8000-4f1a2b3c4d5e"  # as LangGraph makes them (uuid6)


def through_proxy(client_address: str = "203.0.113.10") -> dict[str, Any]:
    """The WSGI environ of a request the TLS-terminating proxy on this machine forwarded: it
    passes the browser's Host on (without it Django would read the host as `testserver:80`)."""
    return {
        "HTTP_HOST": "testserver",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_X_FORWARDED_PROTO": "https",
        "HTTP_X_FORWARDED_FOR": client_address,
    }


def agent_client(api_key: str, client_address: str = "203.0.113.10") -> APIClient:
    client = APIClient(**through_proxy(client_address))
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return client


def person_client(workspace: Workspace, username: str, role: str) -> APIClient:
    """A person's browser, signed in, sending the CSRF cookie and header (not yet an Origin)."""
    client = APIClient(enforce_csrf_checks=True, **through_proxy("198.51.100.20"))
    client.force_login(f.make_person(workspace, username, role))
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    client.defaults["HTTP_X_CSRFTOKEN"] = token
    return client


def login(username: str, password: str, client_address: str) -> Any:
    """A sign-in as a browser makes it through the proxy: the form's page (its CSRF cookie),
    then the form's POST with the token and the page's origin."""
    browser = Client(enforce_csrf_checks=True, **through_proxy(client_address))
    assert browser.get(LOGIN).status_code == 200
    form = {
        "username": username,
        "password": password,
        "csrfmiddlewaretoken": browser.cookies["csrftoken"].value,
    }
    return browser.post(LOGIN, form, HTTP_ORIGIN=ORIGIN)


def chats(count: int, tag: str = "c") -> bytes:
    one = [{"role": "user", "content": "hi"}]
    return json.dumps([{"id": f"{tag}-{n}", "messages": one} for n in range(count)]).encode()


def upload(client: APIClient, content: bytes, fmt: str = "openai-chat") -> Any:
    body = {"file": SimpleUploadedFile("chats.json", content), "format": fmt}
    return client.post(IMPORTS, body, format="multipart")


def allow_agents(workspace: Workspace) -> None:
    workspace.agents_may_import = True
    workspace.save(update_fields=["agents_may_import"])


def check_deploy() -> str:
    out = io.StringIO()
    call_command("check", "--deploy", stdout=out, stderr=out)
    return out.getvalue()


def untrusted_total() -> float:
    """The runtime counter, as Prometheus reads it: with the token, through the proxy."""
    answer = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **through_proxy())
    assert answer.status_code == 200, answer.content
    for family in text_string_to_metric_families(answer.content.decode()):
        if family.name == UNTRUSTED:
            return sum(s.value for s in family.samples if s.name == f"{UNTRUSTED}_total")
    raise AssertionError(f"{UNTRUSTED} missing from /metrics")


# --- The settings are live --------------------------------------------------------------------


def test_plain_http_is_redirected_to_https_and_proxied_requests_are_not(workspace: Any) -> None:
    """Pages and the API alike: a request that did not come through the proxy's TLS is sent
    to https://, but /metrics, which a scraper on this machine reads from gunicorn directly; the
    proxy's requests are answered, with HSTS and secure cookies."""
    plain = Client(REMOTE_ADDR="127.0.0.1")
    for path in (LOGIN, "/api/v1/threads/"):
        answer = plain.get(path)
        assert answer.status_code == 301, (path, answer.status_code)
        assert answer["Location"] == f"https://testserver{path}"
    scraped = plain.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert scraped.status_code == 200 and b"ctxadmin_" in scraped.content

    browser = Client(**through_proxy())
    page = browser.get(LOGIN)
    assert page.status_code == 200
    assert page["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert browser.cookies["csrftoken"]["secure"] is True
    assert browser.get("/api/v1/threads/").status_code == 401  # reached the API: no key
    scrape = browser.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert scrape.status_code == 200

    f.make_person(workspace, "ada", "operator")
    signed_in = login("ada", f.PASSWORD, "203.0.113.10")
    assert signed_in.status_code == 302 and signed_in["Location"] == "/threads/"
    assert signed_in.cookies["sessionid"]["secure"] is True


# --- 1. Imports -------------------------------------------------------------------------------


def test_an_agent_key_imports_only_where_the_workspace_allows_it(
    workspace: Workspace, api_key: str, django_capture_on_commit_callbacks: Any
) -> None:
    agent = agent_client(api_key)
    with django_capture_on_commit_callbacks(execute=True):
        refused = upload(agent, chats(2))
    assert refused.status_code == 403, refused.content
    error = refused.json()["error"]
    assert error["code"] == "permission_denied" and "may not import" in error["message"]
    assert error["fields"] == {}
    assert not TraceImport.objects.exists() and not Thread.objects.exists()

    allow_agents(workspace)
    with django_capture_on_commit_callbacks(execute=True):
        accepted = upload(agent, chats(2))
    assert accepted.status_code == 202, accepted.content
    assert sorted(Thread.objects.values_list("external_id", flat=True)) == ["c-0", "c-1"]


def test_a_file_over_the_conversations_limit_ends_failed_and_imports_nothing(
    workspace: Workspace, api_key: str, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    allow_agents(workspace)
    settings.CTXADMIN_MAX_IMPORT_CONVERSATIONS = 3
    agent = agent_client(api_key)
    with django_capture_on_commit_callbacks(execute=True):
        answer = upload(agent, chats(4))
    assert answer.status_code == 202, answer.content
    report = agent.get(f"{IMPORTS}{answer.json()['import_id']}/").json()
    assert report["state"] == "failed"
    assert "CTXADMIN_MAX_IMPORT_CONVERSATIONS" in report["error"]
    assert "4 conversations" in report["error"] and "nothing was imported" in report["error"]
    assert report["report"] == []
    assert not Thread.objects.exists() and not Event.objects.exists()


def test_an_admins_cancel_through_the_proxy_is_answered_and_audited(
    workspace: Workspace, api_key: str
) -> None:
    """Over HTTPS Django's CSRF check also wants the page's origin: without it the cancel is
    refused, with it answered. The import is pending (no worker took it) and never runs."""
    allow_agents(workspace)
    agent = agent_client(api_key)
    import_id = upload(agent, chats(3)).json()["import_id"]
    cancel = f"{IMPORTS}{import_id}/cancel/"
    admin = person_client(workspace, "boss", "admin")

    no_origin = admin.post(cancel)
    assert no_origin.status_code == 403, no_origin.content
    assert no_origin.json()["error"]["code"] == "permission_denied"
    assert "Referer" in no_origin.json()["error"]["message"]
    assert agent.post(cancel).status_code == 403  # an agent key may not cancel
    assert not AuditEntry.objects.filter(action="import.cancel").exists()

    answer = admin.post(cancel, HTTP_ORIGIN=ORIGIN)
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "cancelled" and answer.json()["cancelled_by"] == "boss"
    entry = AuditEntry.objects.get(action="import.cancel")
    assert entry.actor_label == "boss" and entry.before == {"state": "pending"}
    ran = import_service.import_run(import_id=import_id)  # the worker takes it later
    assert ran["state"] == ImportState.CANCELLED
    assert not Thread.objects.exists()


# --- 2. /metrics behind the proxy -------------------------------------------------------------


@pytest.mark.parametrize(
    "forwarded_for", ["203.0.113.9", "127.0.0.1", "::1", "127.0.0.1, 203.0.113.9"]
)
def test_without_a_token_metrics_refuses_whatever_came_through_the_proxy(
    production: Any, forwarded_for: str
) -> None:
    """Behind a trusted proxy on this machine every request is from loopback; a forwarded one
    is refused whatever address it claims."""
    production.CTXADMIN_METRICS_TOKEN = ""
    answer = Client().get("/metrics", **through_proxy(forwarded_for))
    assert answer.status_code == 403
    assert b"ctxadmin_" not in answer.content


def test_without_a_token_a_direct_loopback_scrape_is_answered(production: Any) -> None:
    """A scraper on this machine reads gunicorn directly over HTTP, HTTPS redirect on: no
    token needed from loopback, refused from anywhere else or through the proxy."""
    production.CTXADMIN_METRICS_TOKEN = ""
    answer = Client().get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert answer.status_code == 200
    assert b"ctxadmin_events_appended" in answer.content
    assert Client().get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="192.0.2.4").status_code == 403
    assert Client().get("/metrics", **through_proxy()).status_code == 403


def test_with_a_token_the_token_reads_metrics_through_the_proxy() -> None:
    client = Client(**through_proxy())
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token").status_code == 401
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200
    assert b"ctxadmin_events_appended" in answer.content


def test_check_deploy_warns_w003_without_a_metrics_token(production: Any) -> None:
    assert "ctxadmin.W003" not in check_deploy()
    production.CTXADMIN_METRICS_TOKEN = ""
    assert "ctxadmin.W003" in check_deploy()


# --- 3. LangGraph checkpoint ids --------------------------------------------------------------


@pytest.mark.parametrize("bad", ["a/b", "..", "latest", "a\x00b"])
def test_a_checkpoint_id_its_url_cannot_reach_is_refused_on_put(api_key: str, bad: str) -> None:
    agent = agent_client(api_key)
    url = "/api/v1/threads/lg-ids/langgraph/checkpoints/"

    def put(checkpoint_id: str) -> Any:
        checkpoint = {"v": 4, "id": checkpoint_id, "channel_versions": {}}
        body = {"checkpoint_id": checkpoint_id, "checkpoint": checkpoint}
        return agent.post(url, body, format="json")

    refused = put(bad)
    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    if "\x00" in bad:  # refused by the JSON parser before any field is read
        assert error["code"] == "invalid_json" and "NUL" in error["message"]
    else:
        assert error["code"] == "validation_error" and "checkpoint_id" in error["fields"]
    assert not LanggraphCheckpoint.objects.exists()
    assert put(GOOD_CHECKPOINT).status_code == 201
    assert list(LanggraphCheckpoint.objects.values_list("checkpoint_id", flat=True)) == [
        GOOD_CHECKPOINT
    ]


# --- 4. An over-long request target -----------------------------------------------------------


def _target(total: int, path: str) -> str:
    """A request target of exactly `total` bytes: `path` and a query string."""
    return path + "?q=" + "a" * (total - len(path) - 3)


def test_a_request_target_over_8000_bytes_is_a_json_414_under_the_api(api_key: str) -> None:
    assert MAX_REQUEST_TARGET == 8000
    agent = agent_client(api_key)
    answer = agent.get(_target(MAX_REQUEST_TARGET + 1, "/api/v1/threads/"))
    assert answer.status_code == 414
    assert answer["Content-Type"] == "application/json"
    error = answer.json()["error"]
    assert error["code"] == "uri_too_long" and error["fields"] == {}
    assert "8000" in error["message"]
    # At the limit the request goes on to the view.
    assert agent.get(_target(MAX_REQUEST_TARGET, "/api/v1/threads/")).status_code == 200


def test_a_request_target_over_8000_bytes_elsewhere_is_plain_text() -> None:
    client = Client(**through_proxy())
    for path in ("/threads/", LOGIN, "/metrics"):
        answer = client.get(_target(MAX_REQUEST_TARGET + 1, path))
        assert answer.status_code == 414, path
        assert answer["Content-Type"].startswith("text/plain")
        assert b"<html" not in answer.content.lower() and b"{" not in answer.content
    assert client.get(_target(MAX_REQUEST_TARGET, LOGIN)).status_code == 200


# --- 5. The import report names every item left out -------------------------------------------


def test_an_import_report_names_every_item_it_did_not_import(
    workspace: Workspace, api_key: str, django_capture_on_commit_callbacks: Any
) -> None:
    """Issue #27's Anthropic conversation of five items: two imported, each of the three
    others named with its position and a reason."""
    allow_agents(workspace)
    conversation = {
        "id": "anthropic-five",
        "messages": [
            {"role": "user", "content": "refund order 7"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "refund", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
            {"role": "user", "content": []},
            {"role": "assistant", "content": [{"type": "text", "text": "refunded"}]},
        ],
    }
    agent = agent_client(api_key)
    with django_capture_on_commit_callbacks(execute=True):
        answer = upload(agent, json.dumps([conversation]).encode(), fmt="anthropic")
    assert answer.status_code == 202, answer.content
    report = agent.get(f"{IMPORTS}{answer.json()['import_id']}/").json()
    assert report["state"] == "succeeded"
    (line,) = report["report"]
    assert (line["index"], line["outcome"], line["events"], line["appended"]) == (
        0,
        "created",
        2,
        2,
    )
    assert line["reason"] == (
        "3 items were not imported: "
        "message 1: OpenAI-style `tool_calls` (Anthropic calls tools with tool_use blocks): "
        "its tool calls were not imported; "
        "message 2: role 'tool' is not user or assistant; "
        "message 3: empty content"
    )
    for named in line["reason"].split(": ", 1)[1].split("; "):
        position, reason = named.split(": ", 1)
        assert position.startswith("message ") and reason.strip()
    stored = Event.objects.filter(thread__external_id="anthropic-five").order_by("seq")
    assert [(e.kind, e.role) for e in stored] == [("message", "user"), ("message", "assistant")]


# --- 6. The login lockout behind the proxy ----------------------------------------------------


@pytest.fixture
def ada(workspace: Workspace) -> Any:
    return f.make_person(workspace, "ada", "operator")


def test_without_a_trusted_proxy_five_wrong_passwords_lock_the_user_out_for_everyone(
    production: Any, ada: Any
) -> None:
    """The fault CTXADMIN_TRUSTED_PROXIES=0 causes behind a proxy: five clients each type one
    wrong password, and every client is the proxy's address to the lockout."""
    production.CTXADMIN_TRUSTED_PROXIES = 0
    for n in range(LIMIT):
        login("ada", "wrong", f"203.0.113.{n + 1}")
    locked = login("ada", f.PASSWORD, "198.51.100.7")  # someone else, the right password
    assert locked.status_code == 429
    assert "sessionid" not in locked.cookies
    # One address for all of them: the proxy's. The refused right password counts as a sixth.
    attempts = AccessAttempt.objects.filter(username="ada")
    assert list(attempts.values_list("ip_address", "failures_since_start")) == [
        ("127.0.0.1", LIMIT + 1)
    ]


def test_with_one_trusted_proxy_the_lockout_is_only_the_address_that_typed_them(
    ada: Any,
) -> None:
    for n in range(LIMIT):
        login("ada", "wrong", f"203.0.113.{n + 1}")
    assert login("ada", f.PASSWORD, "198.51.100.7").status_code == 302  # nobody is locked out

    for _ in range(LIMIT):
        login("ada", "wrong", "203.0.113.66")
    assert login("ada", f.PASSWORD, "203.0.113.66").status_code == 429
    assert login("ada", f.PASSWORD, "198.51.100.8").status_code == 302
    # Counted by the forwarded address, never the proxy's: one failure for each of the five
    # first clients, and the five (and the refused right password) of the one locked out.
    attempts = AccessAttempt.objects.filter(username="ada")
    assert dict(attempts.values_list("ip_address", "failures_since_start")) == {
        **{f"203.0.113.{n + 1}": 1 for n in range(LIMIT)},
        "203.0.113.66": LIMIT + 1,
    }


def test_without_a_trusted_proxy_metrics_counts_the_forwarded_requests(production: Any) -> None:
    production.CTXADMIN_TRUSTED_PROXIES = 0
    before = untrusted_total()  # a forwarded request too: counted in what it reads
    client = Client()
    for n in range(3):
        assert client.get(LOGIN, **through_proxy(f"203.0.113.{n}")).status_code == 200
    assert untrusted_total() == before + 3 + 1  # the three and the second scrape

    production.CTXADMIN_TRUSTED_PROXIES = 1
    trusted = untrusted_total()
    client.get(LOGIN, **through_proxy("203.0.113.50"))
    assert untrusted_total() == trusted


def test_check_deploy_warns_w004_without_a_trusted_proxy(production: Any) -> None:
    assert "ctxadmin.W004" not in check_deploy()
    production.CTXADMIN_TRUSTED_PROXIES = 0
    assert "ctxadmin.W004" in check_deploy()


def test_the_operations_page_says_it_came_through_a_proxy_it_does_not_trust(
    production: Any, workspace: Workspace
) -> None:
    production.CTXADMIN_TRUSTED_PROXIES = 0
    browser = Client(**through_proxy())
    browser.force_login(f.make_person(workspace, "olga", "operator"))
    page = browser.get("/operations/")
    assert page.status_code == 200
    assert NOTICE in page.content.decode()

    production.CTXADMIN_TRUSTED_PROXIES = 1
    page = browser.get("/operations/")
    assert page.status_code == 200
    assert NOTICE not in page.content.decode() and "Operations" in page.content.decode()
