# Convenience wrappers; the README's two commands are what CI and users run.
.PHONY: setup demo test test-fast lint bench clean
setup:
	bash scripts/setup.sh
# the project's assets when they are beside the checkout, else the demo downloads them (README)
demo: setup
	$(if $(wildcard ../shared),TINYPROP_ASSETS=$(abspath ../shared)) .venv/bin/tinyprop demo
test: setup
	.venv/bin/python -m pytest -q -n 4 --dist loadfile tests
test-fast: setup
	.venv/bin/python -m pytest -q -n 2 --dist loadfile -m "not slow" tests
lint: setup
	.venv/bin/ruff check host tests datasets
bench: setup
	.venv/bin/tinyprop bench
clean:
	rm -rf build .pytest_cache
