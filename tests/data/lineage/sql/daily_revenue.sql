-- description: Revenue per day, converted to EUR
-- owner: alice@example.com, bob@example.com
-- owner: finance-team@example.com
-- sla: 6h
-- tags: finance, daily

INSERT INTO analytics.daily_revenue
SELECT
    o.order_date            AS day,
    SUM(o.amount * fx.rate) AS revenue_eur,
    COUNT(DISTINCT o.id)    AS orders
FROM raw.orders AS o
JOIN ref.fx_rates fx
  ON o.currency = fx.currency
 AND o.order_date = fx.day
-- owner: not-a-header@example.com (comments below the first statement are not documentation)
GROUP BY o.order_date;
