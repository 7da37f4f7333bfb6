"""The TPC-H schema (TPC-H 3.0.1, 1.4) as Spark SQL types, as ``tpchgen-cli`` writes it."""

from __future__ import annotations

DECIMAL = "decimal(15,2)"

SCHEMAS: dict[str, dict[str, str]] = {
    "part": {
        "p_partkey": "bigint", "p_name": "string", "p_mfgr": "string", "p_brand": "string",
        "p_type": "string", "p_size": "int", "p_container": "string",
        "p_retailprice": DECIMAL, "p_comment": "string",
    },
    "supplier": {
        "s_suppkey": "bigint", "s_name": "string", "s_address": "string",
        "s_nationkey": "bigint", "s_phone": "string", "s_acctbal": DECIMAL,
        "s_comment": "string",
    },
    "partsupp": {
        "ps_partkey": "bigint", "ps_suppkey": "bigint", "ps_availqty": "int",
        "ps_supplycost": DECIMAL, "ps_comment": "string",
    },
    "customer": {
        "c_custkey": "bigint", "c_name": "string", "c_address": "string",
        "c_nationkey": "bigint", "c_phone": "string", "c_acctbal": DECIMAL,
        "c_mktsegment": "string", "c_comment": "string",
    },
    "orders": {
        "o_orderkey": "bigint", "o_custkey": "bigint", "o_orderstatus": "string",
        "o_totalprice": DECIMAL, "o_orderdate": "date", "o_orderpriority": "string",
        "o_clerk": "string", "o_shippriority": "int", "o_comment": "string",
    },
    "lineitem": {
        "l_orderkey": "bigint", "l_partkey": "bigint", "l_suppkey": "bigint",
        "l_linenumber": "int", "l_quantity": DECIMAL, "l_extendedprice": DECIMAL,
        "l_discount": DECIMAL, "l_tax": DECIMAL, "l_returnflag": "string",
        "l_linestatus": "string", "l_shipdate": "date", "l_commitdate": "date",
        "l_receiptdate": "date", "l_shipinstruct": "string", "l_shipmode": "string",
        "l_comment": "string",
    },
    "nation": {
        "n_nationkey": "bigint", "n_name": "string", "n_regionkey": "bigint",
        "n_comment": "string",
    },
    "region": {"r_regionkey": "bigint", "r_name": "string", "r_comment": "string"},
}
"""Table name -> column name -> Spark SQL type, in the spec's column order."""

TABLES = tuple(SCHEMAS)
