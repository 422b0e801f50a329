from cockpit.sim.engine.cli import main

raise SystemExit(main())
