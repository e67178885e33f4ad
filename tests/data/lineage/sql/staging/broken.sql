-- owner: oncall@example.com

INSERT INTO analytics.refunds
SELECT r.id, r.amount
FROM raw.refunds r
JOIN raw.orders o ON o.id = r.order_id
WHERE r.amount > AND o.status = 'paid';
