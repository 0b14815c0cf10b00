# Two commands do everything on a fresh machine: `make reproduce` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHARED ?= ../shared
OUT ?= outputs
PRESET ?= quick

.PHONY: install test reproduce data clean chromium

# Re-install only when the project's metadata, pins or C kernels changed (or the venv is missing). constraints.txt
# pins the numerical packages, so that a fresh machine gets the numbers the fidelity tests were checked with.
$(STAMP): pyproject.toml setup.py constraints.txt hetsched/compiled/_rounds.c hetsched/compiled/_arrays.h hetsched/place/_placement.c hetsched/ui/clean_save.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -c constraints.txt
	$(BIN)/python -m hetsched.ui.clean_save
	touch $(STAMP)

install: $(STAMP)

# Three workers on the 2-core machines: the notebooks' tiny-preset run (one fixture, one worker) beside the rest.
# A third worker fills the time the runtime tests spend waiting for rounds, leases and restarts: with two, a third
# of the workers' time passed with no CPU used. Run back to back on 2026-11-28 (1,324 tests): -n 2 400.0 s,
# -n 3 321.9 s, and 535 / 507 user CPU-s.
test: $(STAMP) chromium
	$(BIN)/python -m pytest -n 3

# The browser test drives Debian's Chromium (Playwright cannot download browsers here); installing needs root.
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
		|| echo "warning: could not install chromium; the browser test will not run"

reproduce: $(STAMP)
	$(BIN)/hetsched reproduce --preset $(PRESET) --out $(OUT)

# Rebuild the project's tables in data/ from the artifacts' public files (see data/README.md).
data: $(STAMP)
	$(BIN)/hetsched convert throughputs $(SHARED)/data/gavel/simulation_throughputs.json data/throughputs/gavel_simulation.parquet
	$(BIN)/hetsched convert throughputs $(SHARED)/data/gavel/physical_cluster_throughputs.json data/throughputs/gavel_physical.parquet
	$(BIN)/hetsched convert throughputs $(SHARED)/data/gavel/oracle_throughputs.json data/throughputs/gavel_oracle.parquet
	$(BIN)/hetsched convert throughputs $(SHARED)/data/shockwave/tacc_throughputs.json data/throughputs/shockwave_tacc.parquet
	$(BIN)/hetsched convert throughputs $(SHARED)/data/shockwave/wisr_throughputs.json data/throughputs/shockwave_wisr.parquet
	$(BIN)/hetsched convert trace $(SHARED)/data/synergy/deploy_trace/static_100job_6_3_1100.0 data/traces/synergy_static_100.csv --from synergy --to csv
	$(BIN)/hetsched convert trace $(SHARED)/data/synergy/deploy_trace/dynamic/srtf.log data/traces/synergy_dynamic_srtf.csv --from synergy --to csv
	$(BIN)/python -c "from hetsched.decide.elastic.convert import convert_all as c; print(c('$(SHARED)/data/sia', 'data/sia'))"
	$(BIN)/python -c "from hetsched.rates.adaptation.schedules import convert_gns_json as c; c('$(SHARED)/data/shockwave/gns_table.json', 'data/shockwave/gns_schedule.csv')"
	for t in 120_0.2_5_100_40_25:120_40_25 220_0.2_5_100_25_4:220_25_4 460_0.2_5_100_10_1:460_10_1 900_0.2_5_1000_5_15:900_5_15 900_0.2_5_100_5_15:900_5_15_grid100; do \
	  $(BIN)/hetsched convert trace "$(SHARED)/data/shockwave/traces/$${t%%:*}_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace" data/traces/shockwave_$${t##*:}.csv --from shockwave --to csv; done

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache
