"""jobmirror: mirror batch/v1 Jobs claimed through spec.managedBy into worker clusters."""

#: The one version source: pyproject.toml reads it (dynamic version), ``--version`` prints it, and
#: the Helm chart's version/appVersion must equal it (tests/unit/test_package_install.py).
__version__ = "0.1.0"
