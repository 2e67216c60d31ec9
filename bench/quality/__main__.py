from bench.quality.run import main

raise SystemExit(main())
