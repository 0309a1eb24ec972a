"""Readers of the feed: the feed consumer, the web UI, the Telegram bot."""
