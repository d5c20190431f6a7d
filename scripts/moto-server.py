"""moto_server, serving one request at a time: the AWS test server the integration tests start.

Same arguments as moto_server (moto.server.main). Why: moto's Secrets Manager is an in-memory
backend behind werkzeug's threaded server, and its calls check, then change (create_secret: "no
secret of that name" then adds one; put_secret_value: "no version with that ClientRequestToken"
then adds it; update_secret_version_stage: "the label is on RemoveFromVersionId" then moves it).
Two requests racing through one of those in two threads can both succeed, which AWS never allows,
and keyroll's key lock (invariant 5) is built on exactly those refusals: with plain moto two
runners were both told they hold a lock (test/integration/aws-lock-race.test.ts counts it). A
lock around the whole WSGI application makes each request atomic, as each AWS request is.
Connections are still served by threads and each request's body is read before the lock is taken,
so a slow client holds no one else up while it sends or receives; only the handling of requests
(in memory, a millisecond or so) takes turns.
"""

import io
import threading

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_one_at_a_time = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


def _serialised(self, environ, start_response):  # type: ignore[no-untyped-def]
    length = environ.get("CONTENT_LENGTH")
    if length:
        body = environ["wsgi.input"].read(int(length))
    elif environ.get("wsgi.input_terminated"):
        body = environ["wsgi.input"].read()  # a chunked body werkzeug ends for us
    else:
        body = b""
    environ["wsgi.input"] = io.BytesIO(body)
    # moto builds the whole response inside the call (werkzeug Response bodies are in memory), so
    # holding the lock for the call covers every read and change of the backend's state.
    with _one_at_a_time:
        return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serialised  # type: ignore[method-assign]

if __name__ == "__main__":
    server.main()
