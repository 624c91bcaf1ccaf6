"""Run the role named by SERVICE_NAME: ingest, processor, query or loadgen."""

import importlib

from svckit import config

ROLES = ("ingest", "processor", "query", "loadgen")

if __name__ == "__main__":
    role = config.service_name()
    if role not in ROLES:
        raise SystemExit(f"SERVICE_NAME must be one of {', '.join(ROLES)}; got {role!r}")
    importlib.import_module(f"pipeline.{role}").main()
