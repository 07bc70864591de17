"""``python -m labeldp.data.fetch``."""

from labeldp.data.fetch import main

raise SystemExit(main())
