-- TPC-H Q18, Large Volume Customer (TPC-H 3.0.1, 2.4.18). Validation: QUANTITY = 300.
-- The spec returns the first 100 rows: kept as ORDER BY ... LIMIT 100. The spec leaves
-- SUM(l_quantity) unnamed; it is named sum_quantity (a view's columns need names).
SELECT
    c_name,
    c_custkey,
    o_orderkey,
    o_orderdate,
    o_totalprice,
    SUM(l_quantity) AS sum_quantity
FROM customer, orders, lineitem
WHERE o_orderkey IN (
        SELECT l_orderkey
        FROM lineitem
        GROUP BY l_orderkey
        HAVING SUM(l_quantity) > 300
    )
    AND c_custkey = o_custkey
    AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
ORDER BY o_totalprice DESC, o_orderdate
LIMIT 100
