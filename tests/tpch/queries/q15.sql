-- TPC-H Q15, Top Supplier (TPC-H 3.0.1, 2.4.15). Validation: DATE = 1996-01-01.
-- The spec's CREATE VIEW revenue0 / DROP VIEW pair is written as a WITH clause, the
-- spec's variant of this query (a view is one SELECT statement).
-- order: ORDER BY s_suppkey
WITH revenue0 AS (
    SELECT
        l_suppkey AS supplier_no,
        SUM(l_extendedprice * (1 - l_discount)) AS total_revenue
    FROM lineitem
    WHERE l_shipdate >= DATE '1996-01-01'
        AND l_shipdate < DATE '1996-01-01' + INTERVAL '3' MONTH
    GROUP BY l_suppkey
)
SELECT
    s_suppkey,
    s_name,
    s_address,
    s_phone,
    total_revenue
FROM supplier, revenue0
WHERE s_suppkey = supplier_no
    AND total_revenue = (SELECT MAX(total_revenue) FROM revenue0)
