from kprof_core.cli import main

raise SystemExit(main())
