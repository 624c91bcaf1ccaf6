"""What the online shop's shoppers get when they open their order history (the archives kept as
large objects in PostgreSQL), asked the way a shopper's browser does, from a pod of the app.

Which shoppers have an archive is read from the shop's own database (``order_archives``), so the
check follows whatever the shop was seeded with; every archive is requested, those whose pages sit
on bad blocks included.
"""

from __future__ import annotations

import json

DB_POD, DB_CONTAINER = "shop-db-0", "postgres"
# Each shopper's order history, asked in turn from inside a pod (in turn: parallel requests made
# the api itself time out while it read bad pages); after three requests in a row that got no
# answer at all (a partition makes every one hang), or after 90 s (slow error pages), the rest are
# not asked: at most 100 s, not 50 x 10 s.
# JSON on stdout.
ASK = r"""
import json, sys, time, urllib.error, urllib.request
base, path, users = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
failed, unanswered, asked, end = [], 0, 0, time.time() + 90
for u in users:
    if unanswered >= 3 or time.time() > end:
        failed.append(f"{len(users) - asked} more not asked: " + ("the last 3 requests got no answer"
                      if unanswered >= 3 else "90 s are up (every answer slow)"))
        break
    asked += 1
    try:
        body = json.loads(urllib.request.urlopen(base + path.format(u), timeout=10).read())
        assert body.get("count", 0) > 0, f"no orders in {body}"
        unanswered = 0
    except urllib.error.HTTPError as e:
        failed.append(f"{u}: HTTP {e.code} {e.read()[:300].decode(errors='replace')}")
        unanswered = 0
    except Exception as e:
        failed.append(f"{u}: {type(e).__name__}: {e}")
        unanswered += 1
print(json.dumps({"asked": asked, "failed": failed}))
"""


def shoppers(kube, ns: str) -> list[str]:
    """The shoppers that have an order archive, from the shop's database ([] if it cannot say)."""
    proc = kube.kubectl("exec", "-n", ns, DB_POD, "-c", DB_CONTAINER, "--", "sh", "-c",
                        'psql -h /tmp -U "$POSTGRES_USER" -d "${POSTGRES_DATABASES%% *}" -Atc '
                        '"SELECT customer FROM order_archives ORDER BY customer"', check=False, timeout=60)
    return proc.stdout.split() if proc.returncode == 0 else []


def order_histories(kube, ns: str, pod: str, container: str, base: str,
                    path: str = "/account/{}/orders") -> tuple[int, list[str]]:
    """(how many shoppers were asked, the failures) for every shopper's order history, asked from
    ``pod`` at ``base`` (``http://web:8080``: the shop's front; ``http://api:8080`` with
    ``/customers/{}/orders/archive``: the api's answer, its error text included)."""
    users = shoppers(kube, ns)
    if not users:
        return 0, [f"the shop's database did not list its shoppers (from {DB_POD})"]
    proc = kube.kubectl("exec", "-n", ns, pod, "-c", container, "--", "python3", "-c", ASK, base, path,
                        ",".join(users), check=False, timeout=300)
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return len(users), [f"no answer from {pod}: {proc.stderr.strip()[:200]}"]
    return out["asked"], out["failed"]
