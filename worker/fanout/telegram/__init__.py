"""The Telegram bot: sending stored observations, answering commands."""
