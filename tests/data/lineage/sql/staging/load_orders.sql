-- description: Stages the day's orders, then publishes them.
SET spark.sql.shuffle.partitions = 64;

CREATE OR REPLACE TEMPORARY VIEW new_orders AS
SELECT id, customer_id, amount, currency, CAST(created_at AS DATE) AS order_date
FROM landing.orders_json
WHERE created_at >= current_date();

INSERT OVERWRITE TABLE analytics.orders_clean PARTITION (order_date)
SELECT id, customer_id, amount, currency, order_date FROM new_orders;

-- a check, not a write
SELECT COUNT(*) FROM analytics.orders_clean;

MSCK REPAIR TABLE analytics.orders_clean;
