"""Shared test support: real servers on loopback, fakes for services we cannot reach."""
