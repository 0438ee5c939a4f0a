"""``python -m lar_evals ...``: the evaluation harness's command line (see ``lar_evals.cli``)."""
import faulthandler
import sys

from lar_evals.cli import main

# Long harness runs have ended with a native abort at interpreter exit, after their results were
# written ("FATAL: exception not rethrown"); this prints every thread's Python stack when that
# happens, so the thread behind it can be found.
faulthandler.enable()
sys.exit(main())
