"""The hotel reservation services (DeathStarBench topology), one role per process."""
