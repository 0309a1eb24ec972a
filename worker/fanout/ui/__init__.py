"""The web UI: live feed, filters, search, session pages, operator panel."""
