.PHONY: test unit demo bed-up bed-down bench e2e lint

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

bench:
	bash scripts/bootstrap.sh && .venv/bin/python -m bench $(ARGS)
