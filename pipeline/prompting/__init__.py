"""What the observer is sent: modes, prompts, tool-call framing and truncation, the conversation."""
