"""The CLI's requests retry what the API server asks to be retried, as client-go does: a 429 or 5xx
with ``Retry-After`` (the server's "storage is (re)initializing" while a watch cache starts, which
failed the on-call page's ``why`` on a fresh control plane), bounded; anything else fails at once."""
from __future__ import annotations

import http.server
import json
import threading
import types
from collections.abc import Iterator

import kopf
import pytest

from kopf_outcomes.diagnosis import kube
from kopf_outcomes.diagnosis.kube import Client, KubeError


class Server(http.server.ThreadingHTTPServer):
    answers: list[tuple[int, dict[str, str]]]  # (status, headers) to give before 200, in order
    seen: list[tuple[str, bytes]]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server

    def answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.seen.append((self.command, self.rfile.read(length)))
        status, headers = self.server.answers.pop(0) if self.server.answers else (200, {})
        body = json.dumps({"kind": "Status", "message": "storage is (re)initializing"} if status != 200
                          else {"items": [], "metadata": {}}).encode()
        self.send_response(status)
        for name, value in {**headers, "Content-Type": "application/json"}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PATCH = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    found = Server(("127.0.0.1", 0), Handler)
    found.answers, found.seen = [], []
    thread = threading.Thread(target=found.serve_forever, daemon=True)
    thread.start()
    yield found
    found.shutdown()
    found.server_close()


def client(server: Server) -> Client:
    return Client(kopf.ConnectionInfo(server=f"http://127.0.0.1:{server.server_address[1]}"))


def test_a_429_with_retry_after_is_sent_again_and_read(server: Server) -> None:
    server.answers = [(429, {"Retry-After": "0"}), (503, {"Retry-After": "0"})]
    assert client(server).get("/apis/kopf.dev/v1/kopfpeerings") == {"items": [], "metadata": {}}
    assert [verb for verb, _ in server.seen] == ["GET"] * 3


def test_a_patch_is_sent_again_with_its_body(server: Server) -> None:
    server.answers = [(429, {"Retry-After": "0"})]
    client(server).merge_patch("/api/v1/namespaces/ns/configmaps/x", {"metadata": {"labels": {"a": "b"}}})
    assert server.seen == [("PATCH", b'{"metadata": {"labels": {"a": "b"}}}')] * 2


@pytest.mark.parametrize("status, headers", [(429, {}), (503, {}), (500, {"Retry-After": "soon"}),
                                             (409, {"Retry-After": "0"})])
def test_an_answer_that_does_not_ask_to_be_retried_fails_at_once(server: Server, status: int,
                                                                  headers: dict[str, str]) -> None:
    server.answers = [(status, headers)]
    with pytest.raises(KubeError) as e:
        client(server).get("/apis/kopf.dev/v1/kopfpeerings")
    assert e.value.status == status and "storage is (re)initializing" in str(e.value)
    assert len(server.seen) == 1


def test_retries_are_bounded_and_the_last_answer_is_the_error(server: Server,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "RETRIES", 3)
    server.answers = [(429, {"Retry-After": "0"})] * 10
    with pytest.raises(KubeError, match=r"GET /apis/kopf.dev/v1/kopfpeerings: 429 storage is \(re\)initializing"):
        client(server).get("/apis/kopf.dev/v1/kopfpeerings")
    assert len(server.seen) == 4


def test_a_long_retry_after_is_waited_at_most_the_longest_wait(server: Server,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[float] = []
    monkeypatch.setattr(kube, "time", types.SimpleNamespace(sleep=waited.append))
    server.answers = [(429, {"Retry-After": "3600"}), (429, {"Retry-After": "2"})]
    client(server).get("/apis/kopf.dev/v1/kopfpeerings")
    assert waited == [kube.LONGEST_WAIT, 2.0]
