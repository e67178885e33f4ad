"""The API's endpoints, a router per area: health, datasets (and their versions), changes (checks,
the gate, acceptances, releases) and reports (search, cost, export)."""
