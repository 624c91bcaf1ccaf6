"""The online shop: web tier, API, background order workers and the load generator."""
