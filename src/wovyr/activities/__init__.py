"""Activity kinds: registered Python tools and the built-ins (http, shell, set, wait)."""
