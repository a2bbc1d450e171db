from rlperf.cli import main

raise SystemExit(main())
