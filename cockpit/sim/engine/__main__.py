from cockpit.sim.engine.boot import main

raise SystemExit(main())
