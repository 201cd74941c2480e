"""Schedules: when a workflow should start on its own (cron or interval), and what to do
about ticks that were missed. `wovyr.scheduling.spec` holds the pure time computation."""
