/*
 * dataset: Mart.Customer_LTV
 * description: Lifetime value per customer.
 * owner: crm@example.com
 * tags: crm
 */
WITH orders AS (
    SELECT customer_id, amount FROM analytics.orders_clean
),
totals AS (
    SELECT customer_id, SUM(amount) AS lifetime_value FROM orders GROUP BY customer_id
)
SELECT c.id AS customer_id, c.email, t.lifetime_value
FROM analytics.customers c
LEFT JOIN totals t ON t.customer_id = c.id
