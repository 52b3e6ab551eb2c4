"""The Content Security Policy (docs/dashboard.md, "Dashboard"): scripts from this origin only,
nothing inline or evaluated; Swagger UI's page relaxes inline <style> only, never scripts."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.access.csp import csp_script_problem, directives

pytestmark = pytest.mark.django_db


def test_a_dashboard_page_carries_the_policy(admin: Client) -> None:
    response = admin.get("/threads/")
    assert response.status_code == 200
    policy = directives(response["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"] and policy["style-src-elem"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"] and policy["base-uri"] == ["'self'"]
    assert csp_script_problem(response) == ""


def test_pages_have_no_inline_script_or_style_element(admin: Client) -> None:
    for url in ("/threads/", "/side-effects/", "/approvals/", "/audit/", "/keys/", "/forget/"):
        page = admin.get(url).content.decode()
        assert "<style" not in page, url
        for tag in page.split("<script")[1:]:
            assert tag.lstrip().startswith("src=") or " src=" in tag.split(">")[0], url


def test_the_login_page_carries_it_too(client: Client) -> None:
    assert csp_script_problem(client.get("/accounts/login/")) == ""


def test_swagger_ui_relaxes_inline_styles_only(client: Client) -> None:
    response = client.get("/api/docs/")
    assert response.status_code == 200
    policy = directives(response["Content-Security-Policy"])
    assert "'unsafe-inline'" in policy["style-src-elem"]
    assert policy["script-src"] == ["'self'"]
    assert "<script>" not in response.content.decode()  # its set-up script is a file
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and b"SwaggerUIBundle" in script.content
