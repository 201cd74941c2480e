"""The routers of API v1: workflows, schedules, admin (keys), health (and metrics)."""
