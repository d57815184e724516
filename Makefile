.PHONY: test unit demo bench bench-compare chaos e2e e2e-kind lint docs docs-serve lock

# The README's two commands.
demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

unit:
	bash scripts/bootstrap.sh && .venv/bin/pytest -m "not integration and not conformance and not e2e and not chaos"

e2e:
	bash scripts/bootstrap.sh && .venv/bin/pytest -m e2e e2e

lint:
	.venv/bin/ruff check . && .venv/bin/mypy
	if command -v shellcheck >/dev/null; then shellcheck scripts/*.sh e2e/kind/run.sh deploy/worker/make-kubeconfig.sh; fi

bench:
	bash scripts/bootstrap.sh && .venv/bin/python -m bench $(ARGS)

# Every fault scenario at 200 Jobs, judged by testkit/invariants.py: results/chaos.json + .png
chaos:
	bash scripts/bootstrap.sh && .venv/bin/python -m bench chaos $(ARGS)

# jobmirror vs MultiKueue v0.19.2 vs the guarantees floor vs the bare-API limit (builds Kueue on first use, 10-20 min).
bench-compare:
	bash scripts/bootstrap.sh && .venv/bin/python -m bench compare $(ARGS)

e2e-kind:
	bash e2e/kind/run.sh $(ARGS)

# The docs site (mkdocs.yml, docs/): regenerate the references from the code, build strictly into site/.
docs:
	bash scripts/bootstrap.sh --python-only && .venv/bin/python -m refdocs && NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

docs-serve:
	bash scripts/bootstrap.sh --python-only && NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve

# Re-resolve requirements/*.txt from pyproject.toml (hashed; ARGS="--upgrade" or "--upgrade-package X").
lock:
	bash scripts/lock.sh $(ARGS)
