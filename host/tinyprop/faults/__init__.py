"""What a board that learns in the field must survive, measured: power cuts and torn flash
operations during a save (store), a lossy link (link), fuzzed parsers (fuzz) and a long run
(soak). `tinyprop bench --only faults` prints their figures."""
