"""One navigation on every operator page (templates/admin/_operator_nav.html; docs/web.md, "Navigation")."""

import re

import pytest
from django.urls import reverse

from runtime.models import Proposal
from tests.helpers import tick

pytestmark = pytest.mark.django_db

REAPER_ON = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
LINKS = [
    ("/dashboard/", "Loops"), ("/admin/runtime/proposal/?status__exact=pending", "Pending 1"),
    ("/admin/runtime/run/", "Runs"), ("/admin/runtime/event/", "Events"),
    ("/admin/runtime/journalentry/", "Journal"), ("/api/docs/", "API"), ("/admin/", "All records"),
]


def nav(page: str) -> tuple[list[tuple[str, str]], list[str]]:
    block = re.search(r'<nav id="ops-nav".*?</nav>', page, re.S).group(0)
    links = [(href.replace("&amp;", "&"), re.sub(r"<[^>]+>|\s+", " ", text).split()) for href, text in
             re.findall(r'<a href="([^"]+)"[^>]*>(.*?)</a>', block, re.S)]
    current = re.findall(r'<a href="([^"]+)" aria-current="page"', block)
    return [(href, " ".join(words)) for href, words in links], current


def test_every_operator_page_has_the_navigation_with_the_pending_count_and_marks_where_one_is(client, viewer, registry_files):
    registry_files.write_config("schedule.yaml", REAPER_ON)
    tick("2026-12-06T09:00:05Z")
    proposal = Proposal.objects.get()
    client.force_login(viewer)
    pages = {
        "/dashboard/": "/dashboard/", "/loops/reaper/": "/dashboard/",
        "/admin/runtime/proposal/?status__exact=pending": "/admin/runtime/proposal/?status__exact=pending",
        reverse("admin:runtime_proposal_change", args=[proposal.pk]): "/admin/runtime/proposal/?status__exact=pending",
        "/admin/runtime/run/": "/admin/runtime/run/", "/admin/runtime/event/": "/admin/runtime/event/",
        "/admin/runtime/journalentry/": "/admin/runtime/journalentry/", "/admin/": "/admin/",
    }
    for path, current in pages.items():
        response = client.get(path)
        assert response.status_code == 200, path
        page = response.content.decode()
        assert nav(page) == (LINKS, [current]), path
        assert '<a class="ops-person" href="/me/"' in page
        assert '<button type="submit">Sign out</button>' in page
        assert '<div id="site-name"><a href="/dashboard/">Factory event runtime</a></div>' in page


def test_the_sign_in_page_has_no_navigation(client):
    assert 'id="ops-nav"' not in client.get(reverse("admin:login")).content.decode()


def test_an_unknown_zone_saves_nothing_and_is_said_escaped_on_the_page(client, viewer):
    from ops.models import ReaderZone

    client.force_login(viewer)
    answer = client.post("/me/", {"zone": "<script>alert(1)</script>"}, follow=True)
    assert answer.redirect_chain == [("/me/", 302)]
    page = answer.content.decode()
    assert "<script>alert(1)</script>" not in page
    assert ("Nothing was saved: &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27; is not a time zone this host knows "
            "(an IANA name: Europe/Budapest).") in page
    assert not ReaderZone.objects.exists()
