"""Loopback fakes of the model APIs the real agents talk to, one module per API."""
