"""The straightforward Python loop `bench sync` measures edc-sync against.

Same work and the same durability per page as edc-sync's commit
(docs/commit.md): GET the page, SHA-256 the whole body, parse and validate
the JSON (records array, largest cursor field), land it under its content
address (temp file, fsync, rename, fsync the directory), append a manifest
line (no fsync), append an audit line (fdatasync), replace the cursor file
by rename (no fsync). Prints one JSON line of figures.

Usage: python3 python_sync.py BASE_URL TOKEN PAGE_SIZE PAGES WORKDIR
"""
import hashlib
import json
import os
import sys
import time
import urllib.request


def main():
    base, token, page_size, pages, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    landing = os.path.join(work, "pages")
    tmp = os.path.join(work, "tmp")
    os.makedirs(landing, exist_ok=True)
    os.makedirs(tmp, exist_ok=True)
    dirfd = os.open(landing, os.O_RDONLY)
    manifest = open(os.path.join(work, "manifest.jsonl"), "ab")
    audit = open(os.path.join(work, "audit.jsonl"), "ab")
    cursor_path = os.path.join(work, "cursor.json")
    url = f"{base}/api/v24.1/query/audit_trail?limit={page_size}"
    done = 0
    cpu0, user0, wall0 = time.process_time(), os.times().user, time.perf_counter()
    while url and done < pages:
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req) as resp:
            body = resp.read()
        digest = hashlib.sha256(body).hexdigest()
        doc = json.loads(body)
        records = doc["data"]
        high = max((r["modified_date__v"] for r in records), default=None)
        part = os.path.join(tmp, f"{done}.part")
        with open(part, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.rename(part, os.path.join(landing, f"{digest}.json"))
        os.fsync(dirfd)
        manifest.write(json.dumps({"sha256": digest, "records": len(records)}).encode() + b"\n")
        manifest.flush()
        audit.write(json.dumps({"event": "page_committed", "payload_sha256": digest, "cursor": high}).encode() + b"\n")
        audit.flush()
        os.fdatasync(audit.fileno())
        with open(cursor_path + ".tmp", "w") as f:
            json.dump({"high_water": high, "last_page_sha256": digest}, f)
        os.rename(cursor_path + ".tmp", cursor_path)
        nxt = doc.get("responseDetails", {}).get("next_page")
        url = (base + nxt if nxt.startswith("/") else nxt) if nxt else None
        done += 1
    cpu, user, wall = time.process_time() - cpu0, os.times().user - user0, time.perf_counter() - wall0
    print(json.dumps({
        "pages": done,
        "cpu_ms_per_page": cpu * 1000 / max(done, 1),
        "user_ms_per_page": user * 1000 / max(done, 1),
        "wall_s": wall,
    }))


main()
