-- owner: group:crm-team
-- sla: 1d
-- tags: gold
-- Lumos reads this header as the documentation of what the file writes, and the
-- statement below as table- and column-level lineage (DataHub's SQL parser).
INSERT OVERWRITE TABLE analytics.customer_360
SELECT
    c.customer_id,
    SUM(o.amount)            AS lifetime_value,
    collect_set(e.device.os) AS segments
FROM raw.customers AS c
LEFT JOIN clean.orders AS o ON o.customer_id = c.customer_id
LEFT JOIN clean.events AS e ON e.user_id = c.customer_id
GROUP BY c.customer_id;
