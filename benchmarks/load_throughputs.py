"""Time to load a throughput dataset (cold process): prints one JSON line."""

import json
import sys
import time

start = time.perf_counter()
from hetsched import load_throughputs  # noqa: E402

imported = time.perf_counter()
table = load_throughputs(sys.argv[1] if len(sys.argv) > 1 else "gavel_simulation")
loaded = time.perf_counter()
print(json.dumps({"dataset": table.name, "keys": len(table.keys), "import_s": round(imported - start, 4),
                  "load_s": round(loaded - imported, 4), "goal_s": 1.0,
                  "ratio_to_goal": round((loaded - start) / 1.0, 3)}))
