"""A random-query fuzzer for view maintenance (issue 20): views, changes, a minimizer."""
