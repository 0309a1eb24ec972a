"""Loopback fakes of the model APIs the real agents speak, scripted per conversation."""
