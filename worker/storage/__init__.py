"""Storage backends behind one Store protocol; storage is the truth, the rest is derived."""
