"""Helpers for tests and offline demos only (the engine never imports them): a local server that
plays back scripted model replies (:mod:`sregym.testing.llm_playback`)."""
