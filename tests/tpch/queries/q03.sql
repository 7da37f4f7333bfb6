-- TPC-H Q3, Shipping Priority (TPC-H 3.0.1, 2.4.3). Validation: SEGMENT = BUILDING,
-- DATE = 1995-03-15. The spec returns the first 10 rows: kept as ORDER BY ... LIMIT 10.
SELECT
    l_orderkey,
    SUM(l_extendedprice * (1 - l_discount)) AS revenue,
    o_orderdate,
    o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING'
    AND c_custkey = o_custkey
    AND l_orderkey = o_orderkey
    AND o_orderdate < DATE '1995-03-15'
    AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority
ORDER BY revenue DESC, o_orderdate
LIMIT 10
