"""A worker process for test_streams' kill test: runs the running-sum pipeline until it dies. Besides the
parent's SIGKILL at a random moment, it exits on its own (os._exit, no cleanup) right before sending a
call or right after its answer, at random (seeded), so deaths land between every pair of calls the
worker makes: after the pop, after the state read, after the cycle committed but before its answer
was used."""
from __future__ import annotations

import os
import random
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from queen_client import Queen  # noqa: E402
from queen_client.streams import Stream  # noqa: E402


def pipeline(source: str, sink: str) -> Stream:
    return Stream.from_(source).reduce(lambda acc, v: acc + v["n"], 0).to(sink)


if __name__ == "__main__":
    url, source, sink, name, seed = sys.argv[1:6]
    rng = random.Random(int(seed))
    send = Queen._run

    def dying_run(self: Queen, call: Any) -> Any:
        if rng.random() < 0.04:
            os._exit(9)
        out = send(self, call)
        if rng.random() < 0.04:
            os._exit(9)
        return out

    Queen._run = dying_run  # type: ignore[method-assign]
    with Queen(url, timeout=10) as q:
        pipeline(source, sink).worker(q, name, batch=7, wait=0.2, lease_seconds=1).run()
