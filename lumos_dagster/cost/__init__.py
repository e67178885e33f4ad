"""What datasets cost: attribution along the lineage, pricing, FOCUS bills."""
