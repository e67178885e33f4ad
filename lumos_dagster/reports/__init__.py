"""Reports for people: schema changes, cost, the estate overview, search."""
