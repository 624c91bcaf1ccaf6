"""Run the service named by SERVICE_NAME (frontend, search, geo, rate, profile, recommendation,
reservation, user) or the load generator (loadgen)."""

import importlib

from svckit import config

ROLES = ("frontend", "search", "geo", "rate", "profile", "recommendation", "reservation", "user", "loadgen")

if __name__ == "__main__":
    role = config.service_name()
    if role not in ROLES:
        raise SystemExit(f"SERVICE_NAME must be one of {', '.join(ROLES)}; got {role!r}")
    importlib.import_module(f"hotel.{role}").main()
