"""The datasets this suite ships, one module per source (:mod:`labeldp.data.registry` discovers them)."""
