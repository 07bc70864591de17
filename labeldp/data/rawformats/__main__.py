"""``python -m labeldp.data.rawformats``."""

from labeldp.data.rawformats import main

raise SystemExit(main())
