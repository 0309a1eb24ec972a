"""What may hold a turn back: token budgets, rate limits, provider pauses."""
