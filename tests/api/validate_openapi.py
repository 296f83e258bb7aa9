#!/usr/bin/env python3
"""Responses of a real broker validated against docs/openapi.yaml, as TAP
for scripts/test.sh.

Starts its own `$QUEEN_BIN serve` on a free port against
$QUEEN_TEST_PG_URL (tenancy on, behind a "trusted proxy", so the tenant
header and the kv quota answers can be reached), makes a representative
call per route, a success and at least one refusal each, and checks for
each that the status is one the document gives the operation, that the
body validates (Draft 2020-12, $refs resolved against the document) and
that the documented headers are there (ETag on a found get, Retry-After on
429 and 503). Each test uses tenants of its own (fresh uuids, kv_quota rows
made here and removed at the end), so it shares nothing with other suites."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import jsonschema
import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC_PATH = os.environ.get("QUEEN_OPENAPI", os.path.join(ROOT, "docs/openapi.yaml"))
PG_URL = os.environ["QUEEN_TEST_PG_URL"]
QUEEN_BIN = os.environ["QUEEN_BIN"]

TENANT = str(uuid.uuid4())    # enabled, unlimited
LIMITED = str(uuid.uuid4())   # no rows
RATED = str(uuid.uuid4())     # no reads or writes per second
UNGATED = str(uuid.uuid4())   # no kv_quota row: feature_gated

with open(DOC_PATH, encoding="utf-8") as f:
    DOC = yaml.safe_load(f)


def psql(sql):
    subprocess.run(["psql", PG_URL, "-qtAc", sql], check=True, stdout=subprocess.DEVNULL)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def template_of(path):
    """The document's path template a concrete path (without query) matches;
    {key} takes the rest of the path, as *key does in the route table."""
    for tpl in DOC["paths"]:
        rx = "^" + re.sub(r"\\\{(\w+)\\\}", lambda m: "(.+)" if m.group(1) == "key" else "([^/]+)",
                          re.escape(tpl)) + "$"
        if re.match(rx, path):
            return tpl
    return None


def resolve(node):
    while isinstance(node, dict) and "$ref" in node:
        cur = DOC
        for part in node["$ref"].lstrip("#/").split("/"):
            cur = cur[part]
        node = cur
    return node


def validate(schema, value):
    """Validates with the document as the root, so every #/components/...
    $ref resolves."""
    root = dict(schema)
    root["components"] = DOC["components"]
    root.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    jsonschema.Draft202012Validator(root).validate(value)


class Broker:
    def __init__(self):
        self.port = free_port()
        env = dict(os.environ, QUEEN_PG_URL=PG_URL, QUEEN_PORT=str(self.port), QUEEN_BIND="127.0.0.1",
                   QUEEN_TENANCY_HEADER="1", QUEEN_TRUSTED_PROXY="1", QUEEN_MAX_BODY_BYTES="65536",
                   QUEEN_LOG_LEVEL=os.environ.get("QUEEN_LOG_LEVEL", "warn"))
        self.proc = subprocess.Popen([QUEEN_BIN, "serve"], env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if self.call("GET", "/health", tenant=None)[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("queen serve exited with %s" % self.proc.returncode)
            time.sleep(0.1)
        raise RuntimeError("queen serve did not become healthy")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def call(self, method, path, body=None, tenant=TENANT, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = dict(headers or {})
        if tenant is not None:
            h.setdefault("x-queen-tenant", tenant)
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        out = (r.status, {k.lower(): v for k, v in r.getheaders()}, raw)
        c.close()
        return out


class Suite:
    def __init__(self, broker):
        self.b = broker
        self.n = 0
        self.failed = 0

    def report(self, ok, name, why=""):
        self.n += 1
        if not ok:
            self.failed += 1
        print(("ok" if ok else "not ok") + " %d - %s" % (self.n, name))
        if not ok:
            for line in str(why).splitlines()[:12]:
                print("# " + line)

    def check(self, name, method, path, body=None, expect=None, tenant=TENANT, headers=None):
        """Calls, then validates; returns the parsed body (or None)."""
        status, hdrs, raw = self.b.call(method, path, body, tenant, headers)
        try:
            parsed = self.judge(method, path, status, hdrs, raw, expect)
            self.report(True, "%s %s -> %d" % (method, name, status))
            return parsed
        except (AssertionError, jsonschema.ValidationError) as e:
            msg = e.message if isinstance(e, jsonschema.ValidationError) else str(e)
            self.report(False, "%s %s -> %d" % (method, name, status), "%s\nbody: %s" % (msg, raw[:400]))
            return None

    def judge(self, method, path, status, hdrs, raw, expect):
        if expect is not None:
            assert status == expect, "expected status %d" % expect
        tpl = template_of(path.split("?", 1)[0])
        if tpl is None:
            assert status == 404, "no documented path, and not a 404"
            response = resolve(DOC["components"]["responses"]["NotFound"])
        else:
            item = DOC["paths"][tpl]
            op = item.get(method.lower())
            if op is None:
                assert status == 405, "the document has no %s on %s, and the broker did not say 405" % (method, tpl)
                op = next(item[m] for m in ("get", "put", "post", "delete") if m in item)
            responses = op["responses"]
            assert str(status) in responses, "status %d is not documented for %s %s" % (status, method, tpl)
            response = resolve(responses[str(status)])
        for name in (response.get("headers") or {}):
            if name == "ETag":
                continue  # only on a found get: checked below
            assert name.lower() in hdrs, "documented header %s is missing" % name
        content = response.get("content")
        if not content:
            assert raw == b"", "status %d is documented without a body" % status
            return None
        ctype = hdrs.get("content-type", "").split(";")[0].strip()
        assert ctype in content, "content type %r is not documented (%s)" % (ctype, ", ".join(content))
        schema = content[ctype].get("schema", {})
        if ctype != "application/json":
            validate(schema, raw.decode())
            return raw.decode()
        parsed = json.loads(raw)
        validate(schema, parsed)
        if isinstance(parsed, dict) and parsed.get("found") is True and method == "GET":
            assert hdrs.get("etag") == '"%d"' % parsed["version"], "a found get carries ETag \"<version>\""
        return parsed


def run(s):
    # ---- operations
    s.check("/health", "GET", "/health", tenant=None, expect=200)
    s.check("/health (other method)", "POST", "/health", body={}, tenant=None, expect=405)
    s.check("/metrics", "GET", "/metrics", tenant=None, expect=200)
    s.check("/metrics (other method)", "PUT", "/metrics", tenant=None, expect=405)
    s.check("/metrics/prometheus", "GET", "/metrics/prometheus", tenant=None, expect=200)
    s.check("/metrics/prometheus (other method)", "DELETE", "/metrics/prometheus", tenant=None, expect=405)
    s.check("an unknown path", "GET", "/api/v1/nothing-here", expect=404)

    # ---- kv
    ops = {"operations": [
        {"op": "put", "ns": "app", "key": "user/1", "value": {"name": "ada"}, "forever": True},
        {"op": "incr", "ns": "app", "key": "hits", "delta": 1, "forever": True},
        {"op": "get", "ns": "app", "key": "user/1"},
        {"op": "getMany", "ns": "app", "keys": ["user/1", "user/2"]},
        {"op": "getPrefix", "ns": "app", "prefix": "user/"},
        {"op": "put", "ns": "app", "key": "once", "value": 1, "forever": True, "expect": 99},
        {"op": "delete", "ns": "app", "key": "none"}]}
    s.check("/api/v1/kv (batch)", "POST", "/api/v1/kv", body=ops, expect=200)
    s.check("/api/v1/kv (bare array)", "POST", "/api/v1/kv", body=[{"op": "get", "ns": "app", "key": "x"}], expect=200)
    s.check("/api/v1/kv (required lost: verdict)", "POST", "/api/v1/kv",
            body=[{"op": "put", "ns": "app", "key": "user/1", "value": 2, "forever": True, "expect": 1,
                   "required": True}], expect=200)
    s.check("/api/v1/kv (bad JSON)", "POST", "/api/v1/kv", body="{", expect=400)
    s.check("/api/v1/kv (no expiry)", "POST", "/api/v1/kv", body=[{"op": "put", "ns": "a", "key": "k", "value": 1}],
            expect=400)
    s.check("/api/v1/kv (over QUEEN_MAX_BODY_BYTES)", "POST", "/api/v1/kv",
            body=json.dumps([{"op": "put", "ns": "a", "key": "k", "value": "x" * 70000, "forever": True}]),
            expect=413)
    s.check("/api/v1/kv (feature gated tenant)", "POST", "/api/v1/kv",
            body=[{"op": "get", "ns": "a", "key": "k"}], tenant=UNGATED, expect=403)
    s.check("/api/v1/kv (quota exceeded)", "POST", "/api/v1/kv",
            body=[{"op": "put", "ns": "a", "key": "k", "value": 1, "forever": True}], tenant=LIMITED, expect=403)
    s.check("/api/v1/kv (bad tenant header)", "POST", "/api/v1/kv", body=[], tenant="not-a-uuid", expect=400)
    s.check("/api/v1/kv (other method)", "GET", "/api/v1/kv", expect=405)

    s.check("/api/v1/kv/{ns}/{key} (found)", "GET", "/api/v1/kv/app/user%2F1", expect=200)
    s.check("/api/v1/kv/{ns}/{key} (slashes, not found)", "GET", "/api/v1/kv/app/a/b/c", expect=200)
    s.check("/api/v1/kv/{ns}/{key} (query string)", "GET", "/api/v1/kv/app/user/1?x=1", expect=400)
    s.check("/api/v1/kv/{ns}/{key} (bad escape)", "GET", "/api/v1/kv/app/%zz", expect=400)
    s.check("/api/v1/kv/{ns}/{key} (put)", "PUT", "/api/v1/kv/app/user/2", body={"value": [1, 2], "ttlSeconds": 60},
            expect=200)
    s.check("/api/v1/kv/{ns}/{key} (put, lost, not required)", "PUT", "/api/v1/kv/app/user/2",
            body={"value": 1, "forever": True, "expect": 0}, expect=200)
    s.check("/api/v1/kv/{ns}/{key} (put, required lost: verdict)", "PUT", "/api/v1/kv/app/user/2",
            body={"value": 1, "forever": True, "expect": 0, "required": True}, expect=200)
    s.check("/api/v1/kv/{ns}/{key} (put naming the key)", "PUT", "/api/v1/kv/app/user/2",
            body={"key": "x", "value": 1, "forever": True}, expect=400)
    s.check("/api/v1/kv/{ns}/{key} (put, rate limited)", "PUT", "/api/v1/kv/app/k",
            body={"value": 1, "forever": True}, tenant=RATED, expect=429)
    s.check("/api/v1/kv/{ns}/{key} (get, rate limited)", "GET", "/api/v1/kv/app/k", tenant=RATED, expect=429)
    s.check("/api/v1/kv/{ns}/{key} (delete)", "DELETE", "/api/v1/kv/app/user/2", expect=200)
    s.check("/api/v1/kv/{ns}/{key} (delete of nothing)", "DELETE", "/api/v1/kv/app/user/2", body=None, expect=200)
    s.check("/api/v1/kv/{ns}/{key} (delete, unknown field)", "DELETE", "/api/v1/kv/app/user/2",
            body={"value": 1}, expect=400)
    s.check("/api/v1/kv/{ns}/{key} (other method)", "POST", "/api/v1/kv/app/user/2", body={}, expect=405)

    s.check("/api/v1/resources/kv/namespaces", "GET", "/api/v1/resources/kv/namespaces", expect=200)
    s.check("/api/v1/resources/kv/quota", "GET", "/api/v1/resources/kv/quota", expect=200)
    s.check("/api/v1/resources/kv/quota (other method)", "DELETE", "/api/v1/resources/kv/quota", expect=405)
    # ---- the console's files
    for path in ("/", "/console/", "/console/app.js", "/console/style.css", "/console/icon.svg"):
        s.check(path, "GET", path, tenant=None, expect=200)
    status, hdrs, _ = s.b.call("GET", "/console/app.js", tenant=None)
    s.check("/console/{file} (If-None-Match)", "GET", "/console/app.js", tenant=None, expect=304,
            headers={"If-None-Match": hdrs.get("etag", "")})
    s.check("/console/{file} (unknown)", "GET", "/console/nothing.js", tenant=None, expect=404)
    s.check("/ (other method)", "POST", "/", body={}, tenant=None, expect=405)
    s.check("/api/v1/resources/kv/namespaces (other method)", "POST", "/api/v1/resources/kv/namespaces", body={},
            expect=405)
    s.check("/api/v1/resources/kv/list", "POST", "/api/v1/resources/kv/list",
            body={"namespace": "app", "prefix": "", "limit": 1}, expect=200)
    s.check("/api/v1/resources/kv/list (keysOnly)", "POST", "/api/v1/resources/kv/list",
            body={"namespace": "app", "keysOnly": True}, expect=200)
    s.check("/api/v1/resources/kv/list (no namespace)", "POST", "/api/v1/resources/kv/list", body={}, expect=400)

    # ---- messages
    q = "oa-" + uuid.uuid4().hex[:8]
    s.check("/api/v1/configure", "POST", "/api/v1/configure",
            body={"queue": q, "namespace": "billing", "task": "invoice", "options": {"leaseTime": 30}}, expect=200)
    s.check("/api/v1/configure (unknown member)", "POST", "/api/v1/configure", body={"queue": q, "leaseTime": 3},
            expect=400)
    s.check("/api/v1/configure (bad option)", "POST", "/api/v1/configure",
            body={"queue": q, "options": {"leaseTme": 3}}, expect=400)
    items = [{"queue": q, "partition": "p%d" % i, "payload": {"n": i}, "transactionId": "t-%d" % i}
             for i in range(4)]
    s.check("/api/v1/push", "POST", "/api/v1/push", body={"items": items}, expect=201)
    s.check("/api/v1/push (a duplicate)", "POST", "/api/v1/push", body={"items": items[:1]}, expect=201)
    s.check("/api/v1/push (no items)", "POST", "/api/v1/push", body={"queue": q}, expect=400)
    s.check("/api/v1/push (other method)", "GET", "/api/v1/push", expect=405)

    popped = s.check("/api/v1/pop/queue/{queue}/partition/{partition}", "GET",
                     "/api/v1/pop/queue/%s/partition/p0" % q, expect=200)
    s.check("/api/v1/pop/queue/{queue}/partition/{partition} (empty)", "GET",
            "/api/v1/pop/queue/%s/partition/p0" % q, expect=204)
    s.check("/api/v1/pop/queue/{queue}/partition/{partition} (batch=0)", "GET",
            "/api/v1/pop/queue/%s/partition/p0?batch=0" % q, expect=400)
    many = s.check("/api/v1/pop/queue/{queue} (partitions=2)", "GET",
                   "/api/v1/pop/queue/%s?partitions=2&batch=10" % q, expect=200)
    s.check("/api/v1/pop/queue/{queue} (bad subscriptionFrom)", "GET",
            "/api/v1/pop/queue/%s?consumerGroup=g&subscriptionFrom=yesterday" % q, expect=400)
    s.check("/api/v1/pop (labels, autoAck)", "GET", "/api/v1/pop?namespace=billing&task=invoice&autoAck=true",
            expect=200)
    s.check("/api/v1/pop (labels, nothing, short wait)", "GET", "/api/v1/pop?namespace=nobody&wait=true&timeout=50",
            expect=204)
    s.check("/api/v1/pop (bad wait)", "GET", "/api/v1/pop?wait=maybe", expect=400)
    s.check("/api/v1/pop (other method)", "POST", "/api/v1/pop", body={}, expect=405)

    lease = popped["leaseId"] if popped else str(uuid.uuid4())
    pid = popped["partitionId"] if popped else str(uuid.uuid4())
    s.check("/api/v1/lease/{leaseId}/extend", "POST", "/api/v1/lease/%s/extend" % lease, body={"seconds": 60},
            expect=200)
    s.check("/api/v1/lease/{leaseId}/extend (unknown lease, no body)", "POST",
            "/api/v1/lease/%s/extend" % uuid.uuid4(), expect=200)
    s.check("/api/v1/lease/{leaseId}/extend (seconds 0)", "POST", "/api/v1/lease/%s/extend" % lease,
            body={"seconds": 0}, expect=400)
    s.check("/api/v1/ack", "POST", "/api/v1/ack", body={"transactionId": "t-0", "partitionId": pid, "leaseId": lease},
            expect=200)
    s.check("/api/v1/ack (not an object)", "POST", "/api/v1/ack", body=[1], expect=400)
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "failed", "error": "timeout"} for m in (many or {}).get("messages", [])]
    acks.append({"transactionId": "nope", "partitionId": str(uuid.uuid4())})
    s.check("/api/v1/ack/batch", "POST", "/api/v1/ack/batch", body={"acknowledgments": acks}, expect=200)
    s.check("/api/v1/ack/batch (no acknowledgments)", "POST", "/api/v1/ack/batch", body={"consumerGroup": "g"},
            expect=400)

    s.check("/api/v1/resources/queues", "GET", "/api/v1/resources/queues", expect=200)
    s.check("/api/v1/resources/queues (other method)", "POST", "/api/v1/resources/queues", body={}, expect=405)

    # ---- transaction
    s.check("/api/v1/transaction", "POST", "/api/v1/transaction", body={
        "operations": [{"type": "push", "items": [{"queue": q, "payload": {"n": 9}}, {"queue": q, "payload": 2}]}],
        "kv": [{"op": "put", "ns": "done", "key": "o-1", "value": True, "forever": True, "expect": 0,
                "required": True}]}, expect=200)
    s.check("/api/v1/transaction (kv only)", "POST", "/api/v1/transaction",
            body={"kv": [{"op": "get", "ns": "done", "key": "o-1"}]}, expect=200)
    s.check("/api/v1/transaction (required lost: failure body)", "POST", "/api/v1/transaction", body={
        "operations": [{"type": "push", "items": [{"queue": q, "payload": 1}]}],
        "kv": [{"op": "put", "ns": "done", "key": "o-1", "value": True, "forever": True, "expect": 0,
                "required": True}]}, expect=200)
    s.check("/api/v1/transaction (lease not live: failure body)", "POST", "/api/v1/transaction", body={
        "operations": [{"type": "push", "items": [{"queue": q, "payload": 1}]}],
        "requiredLeases": [str(uuid.uuid4())]}, expect=200)
    s.check("/api/v1/transaction (kv in operations)", "POST", "/api/v1/transaction",
            body={"operations": [{"type": "kv"}]}, expect=400)
    s.check("/api/v1/transaction (rate limited)", "POST", "/api/v1/transaction",
            body={"kv": [{"op": "put", "ns": "a", "key": "k", "value": 1, "forever": True}]}, tenant=RATED,
            expect=429)

    # ---- streams (the reference SDK's bodies)
    sq = q + "-stream"
    reg = {"name": sq, "source_queue": sq, "sink_queue": sq + "-out", "config_hash": "h1", "reset": False}
    got = s.check("/streams/v1/queries", "POST", "/streams/v1/queries", body=reg, expect=200)
    s.check("/streams/v1/queries (resumed)", "POST", "/streams/v1/queries", body=reg, expect=200)
    s.check("/streams/v1/queries (another hash)", "POST", "/streams/v1/queries", body=dict(reg, config_hash="h2"),
            expect=409)
    s.check("/streams/v1/queries (no name)", "POST", "/streams/v1/queries", body={"source_queue": sq}, expect=400)
    qid = got["query_id"] if got else str(uuid.uuid4())
    s.check("/api/v1/push (stream source)", "POST", "/api/v1/push",
            body={"items": [{"queue": sq, "payload": {"n": 1}}]}, expect=201)
    sp = s.check("/api/v1/pop/queue/{queue} (stream group)", "GET",
                 "/api/v1/pop/queue/%s?consumerGroup=streams.%s" % (sq, sq), expect=200)
    msg = sp["messages"][0] if sp else {"partitionId": str(uuid.uuid4()), "leaseId": str(uuid.uuid4()),
                                         "transactionId": "x"}
    s.check("/streams/v1/state/get", "POST", "/streams/v1/state/get",
            body={"query_id": qid, "partition_id": msg["partitionId"], "keys": []}, expect=200)
    s.check("/streams/v1/state/get (bad query_id)", "POST", "/streams/v1/state/get",
            body={"query_id": "x", "partition_id": msg["partitionId"]}, expect=400)
    cycle = {"query_id": qid, "partition_id": msg["partitionId"], "consumer_group": "streams." + sq,
             "state_ops": [{"type": "upsert", "key": "k", "value": {"acc": 1}}],
             "push_items": [{"queue": sq + "-out", "payload": {"sum": 1}}],
             "ack": {"transactionId": msg["transactionId"], "leaseId": msg["leaseId"], "status": "completed",
                     "count": 1},
             "release_lease": True}
    s.check("/streams/v1/cycle", "POST", "/streams/v1/cycle", body=cycle, expect=200)
    s.check("/streams/v1/cycle (lease gone)", "POST", "/streams/v1/cycle", body=cycle, expect=409)
    s.check("/streams/v1/cycle (bad state op)", "POST", "/streams/v1/cycle",
            body=dict(cycle, state_ops=[{"type": "merge", "key": "k"}]), expect=400)

    # ---- stream windows (the older window API)
    wq = q + "-win"
    wname = wq + "-stream"
    s.check("/api/v1/stream/define", "POST", "/api/v1/stream/define", body={
        "name": wname, "namespace": "api", "source_queue_names": [wq], "partitioned": True,
        "window_type": "tumbling", "window_duration_ms": 1000, "window_grace_period_ms": 0,
        "window_lease_timeout_ms": 30000}, expect=200)
    s.check("/api/v1/stream/define (no sources)", "POST", "/api/v1/stream/define",
            body={"name": wname, "source_queue_names": []}, expect=400)
    wpoll = {"streamName": wname, "consumerGroup": "g", "timeout": 0}
    s.check("/api/v1/stream/poll (nothing ready)", "POST", "/api/v1/stream/poll", body=wpoll, expect=204)
    s.check("/api/v1/push (window source)", "POST", "/api/v1/push",
            body={"items": [{"queue": wq, "partition": "p", "payload": {"n": 1}}]}, expect=201)
    psql("UPDATE queen.log_messages m SET created_at = now() - interval '100 s' FROM queen.log_partitions lp "
         "JOIN queen.queues q ON q.id = lp.queue_id WHERE lp.id = m.partition_id AND q.name = '%s'" % wq)
    win = s.check("/api/v1/stream/poll", "POST", "/api/v1/stream/poll", body=wpoll, expect=200)
    window = win["window"] if win else {"id": "x", "leaseId": str(uuid.uuid4())}
    s.check("/api/v1/stream/poll (bad timeout)", "POST", "/api/v1/stream/poll", body=dict(wpoll, timeout=-1),
            expect=400)
    s.check("/api/v1/stream/renew-lease", "POST", "/api/v1/stream/renew-lease",
            body={"leaseId": window["leaseId"], "extend_ms": 60000}, expect=200)
    s.check("/api/v1/resources/streams", "GET", "/api/v1/resources/streams", expect=200)
    s.check("/api/v1/resources/streams/stats", "GET", "/api/v1/resources/streams/stats", expect=200)
    s.check("/api/v1/resources/streams/{name}", "GET", "/api/v1/resources/streams/%s" % wname, expect=200)
    s.check("/api/v1/resources/streams/{name} (none)", "GET", "/api/v1/resources/streams/none-%s" % wname,
            expect=404)
    s.check("/api/v1/resources/streams/{name}/consumers", "GET",
            "/api/v1/resources/streams/%s/consumers" % wname, expect=200)
    s.check("/api/v1/stream/ack", "POST", "/api/v1/stream/ack",
            body={"windowId": window["id"], "leaseId": window["leaseId"], "success": True}, expect=200)
    s.check("/api/v1/stream/ack (lease gone)", "POST", "/api/v1/stream/ack",
            body={"windowId": window["id"], "leaseId": window["leaseId"], "success": True}, expect=409)
    s.check("/api/v1/stream/renew-lease (lease gone)", "POST", "/api/v1/stream/renew-lease",
            body={"leaseId": window["leaseId"]}, expect=409)
    s.check("/api/v1/stream/seek", "POST", "/api/v1/stream/seek",
            body={"streamName": wname, "consumerGroup": "g", "timestamp": "2000-01-01T00:00:00Z"}, expect=200)
    s.check("/api/v1/stream/seek (bad timestamp)", "POST", "/api/v1/stream/seek",
            body={"streamName": wname, "consumerGroup": "g", "timestamp": "soon"}, expect=400)
    s.check("/api/v1/resources/streams/{name}", "DELETE", "/api/v1/resources/streams/%s" % wname, expect=200)
    s.check("/api/v1/resources/streams/{name} (gone)", "DELETE", "/api/v1/resources/streams/%s" % wname,
            expect=404)

    s.check("/api/v1/resources/queues/{queue}", "DELETE", "/api/v1/resources/queues/%s" % q, expect=200)
    s.check("/api/v1/resources/queues/{queue} (no such queue)", "DELETE", "/api/v1/resources/queues/%s" % q,
            expect=200)
    s.check("/api/v1/resources/queues/{queue} (bad escape)", "DELETE", "/api/v1/resources/queues/%zz", expect=400)


def run_queue_ops(s):
    """Dead letters, consumer groups and the other queue operations."""
    q = "ops-" + uuid.uuid4().hex[:8]
    s.check("/api/v1/configure (retryLimit 0)", "POST", "/api/v1/configure",
            body={"queue": q, "options": {"retryLimit": 0}}, expect=200)
    s.check("/api/v1/push (for dead letters)", "POST", "/api/v1/push",
            body={"items": [{"queue": q, "payload": {"n": i}, "transactionId": "d-%d" % i} for i in range(3)]},
            expect=201)
    popped = s.check("/api/v1/pop/queue/{queue} (for dead letters)", "GET", "/api/v1/pop/queue/%s?batch=3" % q,
                     expect=200) or {"messages": []}
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "failed", "error": "boom"} for m in popped["messages"]]
    s.check("/api/v1/ack/batch (to the dead letters)", "POST", "/api/v1/ack/batch", body={"acknowledgments": acks},
            expect=200)
    page = s.check("/api/v1/dlq", "GET", "/api/v1/dlq?queue=%s&limit=2" % q, expect=200) or {"messages": []}
    s.check("/api/v1/dlq (next page)", "GET", "/api/v1/dlq?queue=%s&limit=2&after=%s" % (q, page.get("nextAfter") or 0),
            expect=200)
    s.check("/api/v1/dlq (limit 0)", "GET", "/api/v1/dlq?limit=0", expect=400)
    ids = [m["id"] for m in page["messages"]] or [1]
    s.check("/api/v1/dlq/requeue", "POST", "/api/v1/dlq/requeue", body={"queue": q, "ids": ids[:1]}, expect=200)
    s.check("/api/v1/dlq/requeue (no queue)", "POST", "/api/v1/dlq/requeue", body={"ids": [1]}, expect=400)
    s.check("/api/v1/dlq/requeue (other method)", "GET", "/api/v1/dlq/requeue", expect=405)
    s.check("/api/v1/dlq/{id}", "DELETE", "/api/v1/dlq/%d" % ids[-1], expect=200)
    s.check("/api/v1/dlq/{id} (not an id)", "DELETE", "/api/v1/dlq/x1", expect=400)
    s.check("/api/v1/dlq (delete the queue's)", "DELETE", "/api/v1/dlq?queue=%s" % q, expect=200)
    s.check("/api/v1/dlq (delete without a queue)", "DELETE", "/api/v1/dlq", expect=400)
    s.check("/api/v1/dlq (other method)", "PUT", "/api/v1/dlq", body={}, expect=405)

    g = "g-" + uuid.uuid4().hex[:8]
    leased = s.check("/api/v1/pop/queue/{queue} (a group's lease)", "GET",
                     "/api/v1/pop/queue/%s?consumerGroup=%s&batch=1" % (q, g), expect=200)
    s.check("/api/v1/consumer-groups", "GET", "/api/v1/consumer-groups", expect=200)
    s.check("/api/v1/consumer-groups/lagging", "GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", expect=200)
    s.check("/api/v1/consumer-groups/lagging (negative)", "GET", "/api/v1/consumer-groups/lagging?minLagSeconds=-1",
            expect=400)
    s.check("/api/v1/consumer-groups/{group}", "GET", "/api/v1/consumer-groups/%s" % g, expect=200)
    s.check("/api/v1/consumer-groups/{group}/queues/{queue}/seek (leased)", "POST",
            "/api/v1/consumer-groups/%s/queues/%s/seek" % (g, q), body={"to": "end"}, expect=409 if leased else 200)
    s.check("/api/v1/consumer-groups/{group} (delete, leased)", "DELETE", "/api/v1/consumer-groups/%s" % g,
            expect=409 if leased else 200)
    if leased:
        m = leased["messages"][0]
        s.check("/api/v1/ack (the group's lease)", "POST", "/api/v1/ack", body={
            "transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
            "consumerGroup": g}, expect=200)
    s.check("/api/v1/consumer-groups/{group}/queues/{queue}/seek", "POST",
            "/api/v1/consumer-groups/%s/queues/%s/seek" % (g, q), body={"to": "beginning"}, expect=200)
    s.check("/api/v1/consumer-groups/{group}/queues/{queue}/seek (bad to)", "POST",
            "/api/v1/consumer-groups/%s/queues/%s/seek" % (g, q), body={"to": "later"}, expect=400)
    s.check("/api/v1/consumer-groups/{group}/queues/{queue}/seek (other method)", "GET",
            "/api/v1/consumer-groups/%s/queues/%s/seek" % (g, q), expect=405)
    s.check("/api/v1/consumer-groups/{group}", "DELETE", "/api/v1/consumer-groups/%s?queue=%s" % (g, q), expect=200)

    s.check("/api/v1/push (to browse)", "POST", "/api/v1/push",
            body={"items": [{"queue": q, "payload": {"b": 1}, "transactionId": "b-1"},
                            {"queue": q, "payload": {"b": 2}, "transactionId": "b-2"}]}, expect=201)
    leased = s.check("/api/v1/pop/queue/{queue} (lease to browse)", "GET", "/api/v1/pop/queue/%s?batch=100" % q,
                     expect=200)
    s.check("/api/v1/messages", "GET", "/api/v1/messages?queue=%s&limit=2" % q, expect=200)
    s.check("/api/v1/messages (no queue)", "GET", "/api/v1/messages", expect=400)
    s.check("/api/v1/messages/{transactionId}", "GET", "/api/v1/messages/b-1?queue=%s" % q, expect=200)
    s.check("/api/v1/messages/{transactionId} (leased)", "DELETE", "/api/v1/messages/b-2?queue=%s" % q,
            expect=409 if leased else 200)
    s.check("/api/v1/messages/{transactionId} (no queue)", "DELETE", "/api/v1/messages/b-2", expect=400)
    s.check("/api/v1/messages/{transactionId} (other method)", "POST", "/api/v1/messages/b-2", body={}, expect=405)

    tpid = leased["partitionId"] if leased else str(uuid.uuid4())
    s.check("/api/v1/traces", "POST", "/api/v1/traces",
            body={"partitionId": tpid, "transactionId": "b-1", "traceName": "seen", "data": {"n": 1}}, expect=201)
    s.check("/api/v1/traces (unknown partition)", "POST", "/api/v1/traces",
            body={"partitionId": str(uuid.uuid4()), "transactionId": "b-1", "traceName": "seen"}, expect=400)
    s.check("/api/v1/traces (other method)", "GET", "/api/v1/traces", expect=405)
    s.check("/api/v1/traces/{partitionId}/{transactionId}", "GET", "/api/v1/traces/%s/b-1" % tpid, expect=200)
    s.check("/api/v1/traces/{partitionId}/{transactionId} (not a uuid)", "GET", "/api/v1/traces/x/b-1", expect=400)
    s.check("/api/v1/traces/by-name/{traceName}", "GET", "/api/v1/traces/by-name/seen?limit=10", expect=200)
    s.check("/api/v1/traces/by-name/{traceName} (limit 0)", "GET", "/api/v1/traces/by-name/seen?limit=0", expect=400)

    moved = s.check("/api/v1/push (to move)", "POST", "/api/v1/push",
                    body={"items": [{"queue": q + "-mv", "payload": {"m": 1}, "transactionId": "m-1"}]}, expect=201)
    mpid = moved[0]["partition_id"] if moved else str(uuid.uuid4())
    s.check("/api/v1/messages/{partitionId}/{transactionId}/dlq", "POST",
            "/api/v1/messages/%s/m-1/dlq" % mpid, body={}, expect=200)
    s.check("/api/v1/messages/{partitionId}/{transactionId}/dlq (gone)", "POST",
            "/api/v1/messages/%s/m-1/dlq" % mpid, body={}, expect=404)
    s.check("/api/v1/messages/{partitionId}/{transactionId}/dlq (leased)", "POST",
            "/api/v1/messages/%s/b-1/dlq" % tpid, body={}, expect=409 if leased else 404)
    s.check("/api/v1/messages/{partitionId}/{transactionId}/dlq (not a uuid)", "POST",
            "/api/v1/messages/x/m-1/dlq", body={}, expect=400)

    s.check("/api/v1/system/maintenance", "GET", "/api/v1/system/maintenance", tenant=None, expect=200)
    s.check("/api/v1/system/maintenance (bad body)", "POST", "/api/v1/system/maintenance", body={"on": True},
            tenant=None, expect=400)
    try:
        s.check("/api/v1/system/maintenance (on)", "POST", "/api/v1/system/maintenance", body={"enabled": True},
                tenant=None, expect=200)
        s.check("/api/v1/push (maintenance: 503)", "POST", "/api/v1/push",
                body={"items": [{"queue": q, "payload": 1}]}, expect=503)
    finally:
        s.check("/api/v1/system/maintenance (off)", "POST", "/api/v1/system/maintenance", body={"enabled": False},
                tenant=None, expect=200)
    s.check("/api/v1/system/maintenance (other method)", "DELETE", "/api/v1/system/maintenance", tenant=None,
            expect=405)

    s.check("/api/v1/status", "GET", "/api/v1/status", tenant=None, expect=200)
    s.check("/api/v1/status/queues", "GET", "/api/v1/status/queues?limit=10&offset=0", expect=200)
    s.check("/api/v1/status/queues (limit 0)", "GET", "/api/v1/status/queues?limit=0", expect=400)
    s.check("/api/v1/status/queues/{queue}", "GET", "/api/v1/status/queues/%s" % q, expect=200)
    s.check("/api/v1/status/queues/{queue} (unknown)", "GET", "/api/v1/status/queues/none-%s" % q, expect=404)
    s.check("/api/v1/status/analytics", "GET", "/api/v1/status/analytics?interval=minute&queue=%s" % q, expect=200)
    s.check("/api/v1/status/analytics (bad interval)", "GET", "/api/v1/status/analytics?interval=week", expect=400)
    s.check("/api/v1/analytics/system-metrics", "GET", "/api/v1/analytics/system-metrics", tenant=None, expect=200)
    s.check("/api/v1/analytics/worker-metrics", "GET", "/api/v1/analytics/worker-metrics", tenant=None, expect=200)
    s.check("/api/v1/analytics/postgres-stats", "GET", "/api/v1/analytics/postgres-stats", tenant=None, expect=200)
    s.check("/api/v1/analytics/postgres-stats (other method)", "POST", "/api/v1/analytics/postgres-stats", body={},
            tenant=None, expect=405)
    s.check("/api/v1/resources/overview", "GET", "/api/v1/resources/overview", expect=200)
    s.check("/api/v1/resources/namespaces", "GET", "/api/v1/resources/namespaces", expect=200)
    s.check("/api/v1/resources/tasks", "GET", "/api/v1/resources/tasks", expect=200)
    s.check("/api/v1/resources/queues/{queue} (get)", "GET", "/api/v1/resources/queues/%s" % q, expect=200)
    s.check("/api/v1/resources/queues/{queue} (unknown)", "GET", "/api/v1/resources/queues/none-%s" % q, expect=400)
    s.check("/api/v1/resources/queues/{queue}/partitions", "GET", "/api/v1/resources/queues/%s/partitions" % q,
            expect=200)
    s.check("/api/v1/resources/queues/{queue}/clear (leased)", "POST", "/api/v1/resources/queues/%s/clear" % q,
            expect=409 if leased else 200)
    s.check("/api/v1/resources/queues/{queue}/clear (other method)", "GET", "/api/v1/resources/queues/%s/clear" % q,
            expect=405)


def main():
    psql("INSERT INTO queen.kv_quota (tenant_id, enabled) VALUES ('%s', true);"
         "INSERT INTO queen.kv_quota (tenant_id, enabled, max_rows, max_bytes, max_writes_per_sec) "
         "VALUES ('%s', true, 0, 0, null);"
         "INSERT INTO queen.kv_quota (tenant_id, enabled, max_reads_per_sec, max_writes_per_sec) "
         "VALUES ('%s', true, 0, 0)" % (TENANT, LIMITED, RATED))
    broker = None
    try:
        broker = Broker()
        s = Suite(broker)
        run(s)
        run_queue_ops(s)
        print("1..%d" % s.n)
        return 1 if s.failed else 0
    finally:
        if broker is not None:
            broker.stop()
        psql("DELETE FROM queen.kv_quota WHERE tenant_id IN ('%s', '%s', '%s')" % (TENANT, LIMITED, RATED))


if __name__ == "__main__":
    sys.exit(main())
