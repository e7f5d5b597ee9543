"""``python -m shardtrace ARGS...`` runs the vendored CLI."""

from ._launcher import main

main()
