"""``python -m evals ...``: the evaluation harness's command line (see ``evals.cli``)."""
import sys

from .cli import main

sys.exit(main())
