"""Reaching Redis: URLs, TLS, Sentinel, the managed local redis-server, Lua scripts."""
