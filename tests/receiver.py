"""A loopback HTTP receiver for the notifier's webhook tests: it records each POST and answers
``status`` (200 unless a test says otherwise)."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver:
    """A loopback webhook receiver: records each request, answers ``self.status``."""

    def __init__(self):
        self.requests: list[tuple[dict, bytes]] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((dict(self.headers), body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
