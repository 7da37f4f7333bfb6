-- TPC-H Q17, Small-Quantity-Order Revenue (TPC-H 3.0.1, 2.4.17). Validation: BRAND = Brand#23,
-- CONTAINER = MED BOX.
SELECT
    SUM(l_extendedprice) / 7.0 AS avg_yearly
FROM lineitem, part
WHERE p_partkey = l_partkey
    AND p_brand = 'Brand#23'
    AND p_container = 'MED BOX'
    AND l_quantity < (
        SELECT 0.2 * AVG(l_quantity)
        FROM lineitem
        WHERE l_partkey = p_partkey
    )
