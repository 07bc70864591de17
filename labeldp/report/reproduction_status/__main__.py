"""``python -m labeldp.report.reproduction_status``."""

import sys

from labeldp.report.reproduction_status.cli import main

sys.exit(main())
