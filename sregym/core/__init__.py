"""Specs, registries, errors, seeds and records: the bottom layer everything else imports."""
