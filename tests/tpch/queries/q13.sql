-- TPC-H Q13, Customer Distribution (TPC-H 3.0.1, 2.4.13). Validation: WORD1 = special,
-- WORD2 = requests.
-- order: ORDER BY custdist DESC, c_count DESC
SELECT
    c_count,
    COUNT(*) AS custdist
FROM (
    SELECT
        c_custkey,
        COUNT(o_orderkey)
    FROM customer LEFT OUTER JOIN orders
        ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
    GROUP BY c_custkey
) AS c_orders (c_custkey, c_count)
GROUP BY c_count
