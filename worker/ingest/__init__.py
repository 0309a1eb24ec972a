"""What runs on the agent host: preparing, publishing and spooling events, the hook."""
