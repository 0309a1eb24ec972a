"""`python -m worker.cli`: the `memq` console script, for processes memq starts itself."""

from worker.cli.entry import main

main()
