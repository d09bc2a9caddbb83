"""`python -m splitlab ...`: the same CLI as the `splitlab` script."""
from splitlab.cli import main

main()
