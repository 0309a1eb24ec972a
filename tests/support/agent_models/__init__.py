"""Loopback fakes of the model APIs the real agents speak, scripted step by step."""
