"""Operating a fleet: stats, health and metrics serving, dead letters, imports."""
