"""The Store logic both SQL backends share: reads, writes, the search side, row mappings."""
